"""Display helpers for release data, where a missing value (None) must not look like zero.

A number the filters cannot show (not finite, too large to format) shows as missing, like
the stored data's reader (`releases.stored_data`) already makes it: no value breaks a page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()


def _finite(value: Any) -> float | None:
    """The value as a finite float, or None when it is missing, not a number or unreadable."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


@register.filter
def lookup(mapping: Any, key: str) -> Any:
    """`mapping[key]`, or None when the mapping or the key is missing."""
    if isinstance(mapping, dict):
        return mapping.get(key)
    return None


@register.filter
def percent(value: Any, digits: int = 1) -> str | None:
    """0.021 -> "2.1 %"; None stays None (missing)."""
    if (number := _finite(value)) is None:
        return None
    return f"{number * 100:.{digits}f} %"


@register.filter
def milliseconds(value: Any) -> str | None:
    """450 -> "450 ms"; None stays None (missing)."""
    if (number := _finite(value)) is None:
        return None
    return f"{number:,.0f} ms"


@register.filter
def ago(value: Any) -> str | None:
    """A moment as "3 weeks ago": the largest unit only, short enough for a table cell."""
    if value is None:
        return None
    if isinstance(value, datetime) and timezone.now() - value < timedelta(minutes=1):
        return "just now"  # not "0 minutes ago"
    return f"{timesince(value, depth=1)} ago"


@register.filter
def usd(value: Any) -> str | None:
    """Decimal("0.01311") -> "$0.0131"; None stays None (the price is unknown)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        amount = float(value)
    except (TypeError, ValueError):
        return None
    return f"${amount:,.4f}" if amount < 1 else f"${amount:,.2f}"


@register.filter
def seconds(value: Any) -> str | None:
    """9.43 -> "9.4 s", 125 -> "2 min 5 s"; None stays None (not finished)."""
    if (number := _finite(value)) is None:
        return None
    if number < 60:
        return f"{number:.1f} s"
    minutes, rest = divmod(round(number), 60)
    return f"{minutes} min {rest} s"


@register.filter
def number(value: Any) -> str | None:
    """12345 -> "12,345"; None stays None."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return f"{value:,}"


@register.filter
def other_metrics(metrics: Any) -> list[tuple[str, Any]]:
    """The deployment metrics besides error rate and p95, as (readable name, value)."""
    if not isinstance(metrics, dict):
        return []
    # The baselines are shown beside their figures (releases/detail.html).
    known = {"error_rate", "response_time_p95", "error_rate_baseline", "response_time_p95_baseline"}
    return [
        (key.replace("_", " ").capitalize(), value)
        for key, value in sorted(metrics.items())
        if key not in known
    ]


@register.filter
def metric(value: Any) -> str | None:
    """A metric of unknown unit: fractions as-is, up to 4 significant digits."""
    if (number := _finite(value)) is None:
        return None
    return f"{number:,.4g}"


SEVERITY_LEVEL = {"high": 3, "medium": 2, "low": 1}
CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 300, 64, 8


@dataclass(frozen=True)
class ChartPoint:
    x: float
    y: float
    severity: str
    report: Any

    @property
    def x_pct(self) -> float:
        return self.x / CHART_WIDTH * 100


@dataclass(frozen=True)
class SeverityChart:
    points: list[ChartPoint]
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT

    @property
    def polyline(self) -> str:
        return " ".join(f"{point.x:.1f},{point.y:.1f}" for point in self.points)

    @property
    def first_at(self) -> Any:
        return self.points[0].report.filed_at if self.points else None

    @property
    def last_at(self) -> Any:
        return self.points[-1].report.filed_at if len(self.points) > 1 else None

    @property
    def levels(self) -> list[tuple[str, float]]:
        return [(name, _level_y(level)) for name, level in SEVERITY_LEVEL.items()]


def _level_y(level: int) -> float:
    usable = CHART_HEIGHT - 2 * CHART_PAD
    return CHART_PAD + usable * (3 - level) / 2


@register.simple_tag
def severity_chart(reports_oldest_first: list[Any]) -> SeverityChart:
    """Severity over time: each report a point, placed by when it was filed."""
    # Each report at the severity it counts as (a decision; the policy's while it waits).
    reports = [r for r in reports_oldest_first if r.counts_as in SEVERITY_LEVEL]
    if not reports:
        return SeverityChart([])
    first, last = reports[0].filed_at, reports[-1].filed_at
    span = (last - first).total_seconds()
    usable = CHART_WIDTH - 2 * CHART_PAD
    points = []
    for index, report in enumerate(reports):
        if span > 0:
            fraction = (report.filed_at - first).total_seconds() / span
        else:
            fraction = index / (len(reports) - 1) if len(reports) > 1 else 0.5
        points.append(
            ChartPoint(
                x=CHART_PAD + usable * fraction,
                y=_level_y(SEVERITY_LEVEL[report.counts_as]),
                severity=report.counts_as,
                report=report,
            )
        )
    return SeverityChart(points)
