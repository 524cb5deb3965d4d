"""The evals page's chart, laid out on the server: runs over time, with the pass rate (and its
95% interval) and the mean score of each dimension, the baseline marked.

Only geometry is computed here (coordinates in the SVG's own units); the template draws it,
so everything in it stays escaped text and there is no script.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evals.models import EvalRun
from evals.scenario import DIMENSIONS

# Two sizes, drawn both and shown by screen width: an SVG scales its text with its width, so a
# wide chart squeezed onto a phone would have unreadable labels.
WIDE = (960, 280, 12)  # width, height, most run labels under the axis
NARROW = (360, 250, 5)
LEFT, RIGHT, TOP, BOTTOM = 44, 16, 26, 34
Y_TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)

SERIES_NAMES = {
    "pass_rate": "Pass rate",
    "tool_usage": "Tool usage",
    "decision_quality": "Decision quality",
    "error_handling": "Error handling",
    "judge": "LLM judge",
}


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    run_id: int
    value: float
    title: str
    # The 95% interval's ends, as y coordinates (pass rate only).
    y_low: float | None = None
    y_high: float | None = None


@dataclass(frozen=True)
class Series:
    key: str
    name: str
    points: list[Point]

    @property
    def path(self) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)

    @property
    def is_pass_rate(self) -> bool:
        return self.key == "pass_rate"


@dataclass(frozen=True)
class Tick:
    at: float
    label: str
    run_id: int | None = None


@dataclass(frozen=True)
class RunChart:
    series: list[Series] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    baseline_x: float | None = None
    width: int = WIDE[0]
    height: int = WIDE[1]
    left: int = LEFT
    top: int = TOP

    @property
    def right_edge(self) -> int:
        return self.width - RIGHT

    @property
    def bottom_edge(self) -> int:
        return self.height - BOTTOM

    @property
    def empty(self) -> bool:
        return not self.series

    @property
    def viewbox(self) -> str:
        return f"0 0 {self.width} {self.height}"


def run_chart(runs: Sequence[EvalRun], size: tuple[int, int, int] = WIDE) -> RunChart:
    """The chart of the finished runs among `runs` (any order), oldest on the left."""
    width, height, max_labels = size

    def _y(value: float) -> float:
        return round(TOP + (1 - max(0.0, min(1.0, value))) * (height - TOP - BOTTOM), 1)

    def _x(index: int, count: int) -> float:
        span = width - LEFT - RIGHT
        if count == 1:
            return round(LEFT + span / 2, 1)
        pad = min(24.0, span / (2 * count))
        return round(LEFT + pad + index * (span - 2 * pad) / (count - 1), 1)

    y_ticks = [Tick(at=_y(v), label=f"{v:.0%}") for v in Y_TICKS]
    finished = sorted(
        (run for run in runs if run.pass_rate is not None),
        key=lambda run: (run.created_at, run.pk),
    )
    if not finished:
        return RunChart(y_ticks=y_ticks, width=width, height=height)
    count = len(finished)
    pass_points: list[Point] = []
    by_dimension: dict[str, list[Point]] = {}
    ticks: list[Tick] = []
    baseline_x: float | None = None
    label_every = max(1, -(-count // max_labels))
    for index, run in enumerate(finished):
        x = _x(index, count)
        head = run.headline
        rate = float(run.pass_rate or 0.0)
        ci = head.get("pass_rate_ci") or None
        ci_text = f" (95% CI {ci[0]:.0%} to {ci[1]:.0%})" if ci else ""
        pass_points.append(
            Point(
                x=x,
                y=_y(rate),
                run_id=run.pk,
                value=rate,
                title=f"Run #{run.pk}: pass rate {rate:.0%}{ci_text}",
                y_low=_y(ci[0]) if ci else None,
                y_high=_y(ci[1]) if ci else None,
            )
        )
        for dim, mean in (head.get("avg_scores") or {}).items():
            if isinstance(mean, int | float):
                name = SERIES_NAMES.get(dim, dim)
                by_dimension.setdefault(dim, []).append(
                    Point(
                        x=x,
                        y=_y(mean),
                        run_id=run.pk,
                        value=float(mean),
                        title=f"Run #{run.pk}: {name.lower()} {mean:.2f}",
                    )
                )
        if index % label_every == 0 or index == count - 1:
            ticks.append(Tick(at=x, label=f"#{run.pk}", run_id=run.pk))
        if run.is_baseline:
            baseline_x = x
    order = [d for d in (*DIMENSIONS, "judge") if d in by_dimension]
    order += sorted(set(by_dimension) - set(order))
    series = [Series("pass_rate", SERIES_NAMES["pass_rate"], pass_points)]
    series += [Series(d, SERIES_NAMES.get(d, d), by_dimension[d]) for d in order]
    return RunChart(
        series=series,
        x_ticks=ticks,
        y_ticks=y_ticks,
        baseline_x=baseline_x,
        width=width,
        height=height,
    )
