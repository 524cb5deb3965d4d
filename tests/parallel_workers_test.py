"""Each xdist worker's own data dir and Redis database (tests/parallel_workers.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

from tests.parallel_workers import worker_environment, worker_index, worker_redis_url


def test_the_worker_index_is_the_number_in_its_id() -> None:
    assert worker_index("gw0") == 0
    assert worker_index("gw12") == 12
    with pytest.raises(ValueError, match="not a pytest-xdist worker id"):
        worker_index("master")


@pytest.mark.parametrize(
    ("url", "index", "expected"),
    [
        ("redis://127.0.0.1:6379/0", 1, "redis://127.0.0.1:6379/1"),
        ("redis://127.0.0.1:6379/4", 2, "redis://127.0.0.1:6379/6"),
        ("redis://:pw@cache:6380", 1, "redis://:pw@cache:6380/1"),
        ("redis://127.0.0.1:6379/3", 0, "redis://127.0.0.1:6379/3"),
        ("unix:///run/redis.sock?db=2", 3, "unix:///run/redis.sock?db=5"),
    ],
)
def test_each_worker_takes_the_redis_database_its_index_after_the_given_one(
    url: str, index: int, expected: str
) -> None:
    assert worker_redis_url(url, index) == expected


def test_a_worker_never_lands_on_the_benchmarks_redis_databases() -> None:
    with pytest.raises(ValueError, match="Redis database 13 for worker 3"):
        worker_redis_url("redis://127.0.0.1:6379/10", 3)


def test_workers_get_data_dirs_of_their_own_under_the_given_one(tmp_path: Path) -> None:
    environ = {"DETECTIVE_DATA_DIR": str(tmp_path), "REDIS_URL": "redis://127.0.0.1:6379/0"}
    first = worker_environment("gw0", environ, Path("/unused"))
    second = worker_environment("gw1", environ, Path("/unused"))
    assert first == {
        "DETECTIVE_DATA_DIR": str(tmp_path / "xdist-gw0"),
        "REDIS_URL": "redis://127.0.0.1:6379/0",
    }
    assert second["DETECTIVE_DATA_DIR"] == str(tmp_path / "xdist-gw1")
    assert second["REDIS_URL"] == "redis://127.0.0.1:6379/1"


def test_without_a_data_dir_or_redis_the_default_data_dir_is_divided(tmp_path: Path) -> None:
    assert worker_environment("gw1", {}, tmp_path) == {
        "DETECTIVE_DATA_DIR": str(tmp_path / "xdist-gw1")
    }


@pytest.mark.skipif(
    not os.environ.get("PYTEST_XDIST_WORKER"), reason="only under pytest-xdist (-n)"
)
def test_under_xdist_this_worker_runs_on_its_own_data_dir() -> None:
    worker = os.environ["PYTEST_XDIST_WORKER"]
    assert Path(settings.DATA_DIR).name == f"xdist-{worker}"
    assert os.environ["DETECTIVE_DATA_DIR"] == str(settings.DATA_DIR)
