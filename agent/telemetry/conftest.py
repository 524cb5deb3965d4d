from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.testing.telemetry import Telemetry


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    telemetry.tracer_provider.shutdown()
    telemetry.meter_provider.shutdown()
