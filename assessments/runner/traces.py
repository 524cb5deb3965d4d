"""A run's trace, read back for the run page (`assessments/trace_view.py` draws it).

Each process writes its spans to the traces directory the agent's telemetry is configured with
(`<data dir>/traces`, see `configure_process_telemetry`); this reads one trace's spans from
there, as the agent's telemetry stored them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from agent.telemetry import TelemetryConfig, read_trace


def traces_dir() -> Path:
    """Where the site's processes write their traces (the same place the agent's telemetry
    is configured with)."""
    return TelemetryConfig(data_dir=Path(settings.DATA_DIR)).traces_dir


def read_run_trace(trace_id: str, directory: Path | None = None) -> list[dict[str, Any]]:
    """The spans of one trace, from `directory` (the site's traces directory by default);
    an empty list when the trace has no file yet. Raises ValueError for an id that is not a
    trace id."""
    return read_trace(directory or traces_dir(), trace_id)
