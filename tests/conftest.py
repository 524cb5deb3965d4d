"""Fixtures shared by the integration tests in tests/."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.prometheus_server import prometheus_server, require_prometheus


@pytest.fixture(scope="session")
def start_prometheus(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[str], str]]:
    """Starts a real Prometheus over the OpenMetrics text it is given and answers its base URL;
    every server started is stopped at the end of the session. Skips when Debian's prometheus
    package is missing (fails under CI)."""
    require_prometheus()
    with ExitStack() as servers:

        def start(openmetrics: str) -> str:
            workdir: Path = tmp_path_factory.mktemp("prometheus")
            return servers.enter_context(prometheus_server(openmetrics, workdir))

        yield start
