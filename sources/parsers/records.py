"""The records the parsers give: metric samples and a release's metric figures (plain Python)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class MetricSampleRecord:
    name: str
    # Sorted (name, value) pairs, so equal label sets compare and hash equal.
    labels: Labels
    timestamp: datetime | None
    # None: missing (NaN, +Inf, -Inf, or no data); never stands in for zero.
    value: float | None


def finite(value: float | None) -> float | None:
    """The value, or None when it is missing (None, NaN, +Inf, -Inf)."""
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return float(value)


@dataclass(frozen=True)
class MetricSummary:
    """The release's metric figures; None is missing."""

    error_rate: float | None = None
    response_time_p95: float | None = None
    # Which names each came from, for the ingestion's record and for people reading it.
    origin: dict[str, str] = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict[str, float]:
        """The summary's `deployment_metrics` keys, the missing ones left out."""
        figures = {"error_rate": self.error_rate, "response_time_p95": self.response_time_p95}
        return {key: value for key, value in figures.items() if value is not None}
