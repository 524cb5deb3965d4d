"""Shared pytest fixtures and set-up, loaded for every test run (`-p tests.fixtures`)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from detective_site.config import BASE_DIR
from tests.parallel_workers import shared_fixture_group, worker_environment

# Under pytest-xdist (.ci/run passes -n), each worker has a data dir and a Redis database of its
# own (tests/parallel_workers.py); this runs in the worker before Django reads its settings.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.update(
        worker_environment(os.environ["PYTEST_XDIST_WORKER"], os.environ, BASE_DIR / "data")
    )
# The suite installs its own tracing where it tests it; the site's processes and the runs
# the tests start do not write trace files (subprocesses inherit this, unless a test says).
os.environ.setdefault("DETECTIVE_TELEMETRY", "off")
# Review labels the tests export land in a directory of the test run's own, never in the data
# directory whose scenarios a developer's `run_evals` reads (the site's processes inherit it).
os.environ.setdefault(
    "DETECTIVE_REVIEW_SCENARIOS", tempfile.mkdtemp(prefix="detective-review-scenarios-")
)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (it names the tests by them)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Under `--dist loadgroup` (.ci/run): the tests sharing a module's fixtures on one worker.
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        group = shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    from django.conf import settings

    # Password hashing is deliberately slow; tests do not need that.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> Iterator[None]:
    """Each test meets a channel layer of its own.

    pytest-asyncio gives every async test its own event loop, but Channels keeps one layer
    object per process. channels_redis's layer holds asyncio locks per channel, bound to the loop
    that first took them: a consumer test whose receive was still waiting when its loop closed
    leaves such a lock held, and the next test's consumer on that layer dies with "is bound to a
    different event loop" (seen in .ci/run's PostgreSQL + Redis pass, evals/live_test.py).
    """
    yield
    layers = sys.modules.get("channels.layers")
    if layers is not None:
        layers.channel_layers.backends.clear()


@pytest.fixture
def make_release(db: None) -> Callable[..., Any]:
    """Create a release through the service; every field can be overridden."""
    from releases import services

    counter = iter(range(1, 1_000_000))

    def make(version: str | None = None, created_at: datetime | None = None, **fields: Any) -> Any:
        fields.setdefault("title", "A release")
        fields.setdefault("changes", ["Changed something"])
        fields.setdefault("test_results", {"passed": 10, "failed": 0, "skipped": 1})
        fields.setdefault("deployment_metrics", {"error_rate": 0.01, "response_time_p95": 300})
        return services.create_release(
            version=version or f"v1.0.{next(counter)}", created_at=created_at, **fields
        )

    return make
