"""Each xdist worker's own data dir and Redis database (tests/parallel_workers.py)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings

from tests.parallel_workers import (
    shared_fixture_group,
    worker_environment,
    worker_index,
    worker_redis_url,
)


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


def fake_item(scopes: list[str], fixtures: list[str], marker: pytest.Mark | None = None) -> Any:
    """What shared_fixture_group reads of a collected test."""
    definitions = {f"fixture{n}": [SimpleNamespace(scope=scope)] for n, scope in enumerate(scopes)}
    return SimpleNamespace(
        nodeid="tests/browser/site_test.py::test_it[phone]",
        fixturenames=fixtures,
        _fixtureinfo=SimpleNamespace(name2fixturedefs=definitions),
        get_closest_marker=lambda name: marker if name == "django_db" else None,
    )


@pytest.mark.parametrize(
    ("scopes", "fixtures", "marker", "group"),
    [
        (["function", "module"], [], None, "tests/browser/site_test.py:no_db"),
        (
            ["module"],
            [],
            pytest.mark.django_db(transaction=True).mark,
            "tests/browser/site_test.py:transactional_db",
        ),
        (["class"], ["db"], None, "tests/browser/site_test.py:db"),
        (["module"], ["live_server"], None, "tests/browser/site_test.py:transactional_db"),
        (["function", "session"], ["db"], None, None),
    ],
)
def test_tests_sharing_a_module_fixture_are_grouped_by_module_and_database_band(
    scopes: list[str], fixtures: list[str], marker: pytest.Mark | None, group: str | None
) -> None:
    assert shared_fixture_group(fake_item(scopes, fixtures, marker)) == group
