"""The risk policy's signal from each route of the running version (its OTLP traces, issue 36):
a route whose error rate or p95 regressed against its baseline while the service's figures may
not have moved (one route of twenty getting slow barely moves the service's p95).

The figures are the `traces` app's, per route and minute (`traces.history.route_facts` reads
them): a minute's requests, errors and p95 (from its latency sketch). Each judged route's two
series go through the metric judge (`risk.judge.judge_metric`: Mann-Whitney, the effect size,
the minimum change) against the route's baseline minutes, with three guards a per-route judge
needs that a service-wide one does not:

- a minute counts only from `route_minute_min_requests` requests (the p95 of two requests is
  their slower one), and a route is judged only with `route_min_minutes` such minutes in each
  window; a route short of them is not judged and says nothing (a quiet route is no reason to
  look, as the service's own too-little-data is);
- at most the `route_max_routes` busiest routes are judged;
- the family's confidence (`metric_confidence`) is split over the comparisons made (two per
  judged route, Bonferroni): twenty routes of noise then raise a false alarm about as often as
  one metric does, where at 95 % each they would raise one in about half of all releases.

A regression is `route_regression_level` (medium), never critical: it names the route, so a
person can look at it, and one route's p95 is no reason to hold a release on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from risk.judge import (
    JudgeSettings,
    MetricJudgement,
    judge_metric,
    written,
    written_p,
    written_ratio,
)
from risk.settings import PolicySettings
from risk.signal import Signal, plural

__all__ = [
    "ROUTE_REGRESSIONS",
    "MinuteFigures",
    "RouteFacts",
    "RouteWindows",
    "judge_routes",
    "route_regressions",
]

ROUTE_REGRESSIONS = "route_regressions"
ERROR_RATE = "error_rate"
P95 = "response_time_p95"
# Regressions named in the signal's detail; the rest are counted.
NAMED = 3


@dataclass(frozen=True, slots=True)
class MinuteFigures:
    requests: int
    errors: int
    # The minute's p95 in ms, from its sketch (None: no latency was recorded).
    p95_ms: float | None


@dataclass(frozen=True, slots=True)
class RouteWindows:
    route: str
    # Each window's minutes in time order: this release's from its deploy time, and its
    # baseline's (the minutes before the deploy time, or the previous release's first ones).
    release: tuple[MinuteFigures, ...]
    baseline: tuple[MinuteFigures, ...]
    # The baseline in words: "the baseline window", "the previous release (v1.2.0)".
    against: str = "the baseline window"

    @property
    def requests(self) -> int:
        return sum(m.requests for m in self.release)


@dataclass(frozen=True, slots=True)
class RouteFacts:
    version: str
    routes: tuple[RouteWindows, ...] = ()


@dataclass(frozen=True, slots=True)
class RouteJudgement:
    route: RouteWindows
    metric: MetricJudgement
    # How many comparisons shared the family's confidence.
    comparisons: int


def _series(minutes: Sequence[MinuteFigures], name: str, least: int) -> list[float]:
    counted = [m for m in minutes if m.requests >= least]
    if name == ERROR_RATE:
        return [m.errors / m.requests for m in counted]
    return [m.p95_ms for m in counted if m.p95_ms is not None]


def judge_routes(facts: RouteFacts | None, cfg: PolicySettings) -> list[RouteJudgement]:
    """Every comparison made (route and metric), with its judgement; routes short of minutes
    are left out."""
    if facts is None:
        return []
    least, need = cfg.route_minute_min_requests, cfg.route_min_minutes
    names = sorted(cfg.route_metric_settings)
    busiest = sorted(facts.routes, key=lambda r: (-r.requests, r.route))
    series: list[tuple[RouteWindows, str, list[float], list[float]]] = []
    for route in busiest[: cfg.route_max_routes]:
        for name in names:
            before = _series(route.baseline, name, least)
            after = _series(route.release, name, least)
            if len(before) >= need and len(after) >= need:
                series.append((route, name, before, after))
    if not series:
        return []
    # Bonferroni: each comparison at the family's alpha over their number.
    alpha = (1 - cfg.metric_confidence) / len(series)
    settings = JudgeSettings(
        confidence=1 - alpha, min_samples=need, metrics=dict(cfg.route_metric_settings)
    )
    return [
        RouteJudgement(route, judge_metric(name, before, after, settings), len(series))
        for route, name, before, after in series
    ]


def _sentence(found: RouteJudgement, cfg: PolicySettings) -> str:
    m = found.metric
    metric = cfg.route_metric_settings[m.name]
    before, after = m.baseline.centre(m.effect), m.current.centre(m.effect)
    assert before is not None and after is not None and m.p_value is not None
    times = (
        f", {written_ratio(m.ratio, metric.allowed_ratio)} times"
        if m.ratio is not None
        else ", up from none"
    )
    return (
        f"{found.route.route}: {metric.label} {written(after, metric)} over "
        f"{plural(m.current.n, 'minute')} against {written(before, metric)} in "
        f"{found.route.against}{times} (per-minute {m.effect}s; Mann-Whitney p "
        f"{written_p(m.p_value)} among {plural(found.comparisons, 'route comparison')})"
    )


def route_regressions(facts: RouteFacts | None, cfg: PolicySettings) -> list[Signal]:
    judged = judge_routes(facts, cfg)
    failed = [j for j in judged if j.metric.outcome == "fail"]
    if not failed:
        return []
    # The largest change first: that is the route to look at.
    failed.sort(key=lambda j: (-(j.metric.worsening or 0.0), j.route.route, j.metric.name))
    detail = "; ".join(_sentence(j, cfg) for j in failed[:NAMED])
    if len(failed) > NAMED:
        detail += f"; and {len(failed) - NAMED} more route regressions"
    routes = sorted({j.route.route for j in failed})
    level = cfg.route_regression_level
    return [
        Signal(
            name=ROUTE_REGRESSIONS,
            label="Routes slower or failing more than their baseline",
            level=level,
            critical=False,
            figure=", ".join(routes[:NAMED])
            + (f" and {len(routes) - NAMED} more" if len(routes) > NAMED else ""),
            threshold=(
                f"{level} when a route's error rate or p95, minute by minute, rose against its "
                f"baseline (Mann-Whitney at {cfg.metric_confidence * 100:g} % confidence "
                f"across the {plural(judged[0].comparisons, 'comparison')} made, beyond the "
                "allowed ratio and minimum change); routes with at least "
                f"{cfg.route_min_minutes} minutes of {cfg.route_minute_min_requests} requests "
                "in each window"
            ),
            detail=detail,
        )
    ]
