"""The home page's severity trend: reports per week, stacked by severity, as SVG geometry.

Plain code over plain rows (week, severity, count), so the drawing is tested without a
database; `selectors.severity_trend` reads the rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta

LEVELS = ("high", "medium", "low")  # bottom of the stack first
WEEKS = 12
BAR_WIDTH, BAR_GAP, HEIGHT = 18, 8, 90


@dataclass(frozen=True, slots=True)
class Segment:
    severity: str
    count: int
    y: float
    height: float


@dataclass(frozen=True, slots=True)
class WeekBar:
    start: date
    x: float
    counts: dict[str, int]
    segments: list[Segment] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def label(self) -> str:
        parts = [f"{self.counts[level]} {level}" for level in LEVELS if self.counts[level]]
        return f"Week of {self.start:%b} {self.start.day}: " + (", ".join(parts) or "no reports")


@dataclass(frozen=True, slots=True)
class Trend:
    bars: list[WeekBar]
    peak: int
    width: int
    height: int = HEIGHT
    bar_width: int = BAR_WIDTH

    @property
    def total(self) -> int:
        return sum(bar.total for bar in self.bars)

    @property
    def gap_pct(self) -> float:
        """The gap between two bars as a share of the width, for the week labels under them."""
        return round(BAR_GAP / self.width * 100, 3) if self.width else 0.0


def monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def weekly_trend(
    rows: Iterable[tuple[date, str, int]], *, today: date, weeks: int = WEEKS
) -> Trend:
    """The last `weeks` weeks up to the one holding `today`, oldest first, every week drawn
    (a week without reports is an empty slot, not left out)."""
    last = monday(today)
    starts = [last - timedelta(weeks=weeks - 1 - index) for index in range(weeks)]
    counts = {start: dict.fromkeys(LEVELS, 0) for start in starts}
    for week, severity, count in rows:
        start = monday(week)
        if start in counts and severity in LEVELS:
            counts[start][severity] += count
    peak = max((sum(c.values()) for c in counts.values()), default=0)
    bars = []
    for index, start in enumerate(starts):
        bar = WeekBar(start=start, x=index * (BAR_WIDTH + BAR_GAP), counts=counts[start])
        top = float(HEIGHT)
        for level in LEVELS:
            count = counts[start][level]
            if count and peak:
                height = HEIGHT * count / peak
                top -= height
                bar.segments.append(Segment(level, count, round(top, 2), round(height, 2)))
        bars.append(bar)
    return Trend(bars=bars, peak=peak, width=weeks * (BAR_WIDTH + BAR_GAP) - BAR_GAP)
