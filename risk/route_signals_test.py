from __future__ import annotations

import random

from risk.judge import MetricSettings
from risk.route_signals import (
    MinuteFigures,
    RouteFacts,
    RouteWindows,
    judge_routes,
    route_regressions,
)
from risk.settings import PolicySettings

CART = "GET /cart/{cart_id}/total"
PREVIOUS = "the previous release (1.0.0)"


def minutes(
    p95s: list[float], requests: int = 10, errors: list[int] | None = None
) -> tuple[MinuteFigures, ...]:
    errs = errors or [0] * len(p95s)
    return tuple(MinuteFigures(requests, e, p) for p, e in zip(p95s, errs, strict=True))


def steady(level: float, n: int = 30, seed: int = 0) -> list[float]:
    rng = random.Random(f"{level} {n} {seed}")
    return [level * rng.lognormvariate(0, 0.15) for _ in range(n)]


def test_a_route_four_times_slower_is_medium_and_named_with_its_figures() -> None:
    cart = RouteWindows(CART, minutes([840.0] * 30), minutes([210.0] * 30), PREVIOUS)
    quiet = RouteWindows("GET /health", minutes(steady(5)), minutes(steady(5, seed=1)), PREVIOUS)
    [signal] = route_regressions(RouteFacts("1.1.0", (cart, quiet)), PolicySettings())
    assert (signal.name, signal.level, signal.critical, signal.counts_as) == (
        "route_regressions", "medium", False, "medium",
    )  # fmt: skip
    assert signal.figure == CART
    assert signal.detail == (
        "GET /cart/{cart_id}/total: p95 840 ms over 30 minutes against 210 ms in the previous "
        "release (1.0.0), 4.0 times (per-minute medians; Mann-Whitney p < 0.001 among 4 route "
        "comparisons)"
    )


def test_a_route_failing_more_is_named_by_its_error_rate() -> None:
    flat = steady(120)
    before = minutes(flat, errors=[1 if i % 10 == 0 else 0 for i in range(30)])
    after = minutes(flat, errors=[1 if i % 2 == 0 else 0 for i in range(30)])
    [signal] = route_regressions(
        RouteFacts("1.1.0", (RouteWindows(CART, after, before),)), PolicySettings()
    )
    assert signal.detail.startswith(
        "GET /cart/{cart_id}/total: error rate 5 % over 30 minutes against 1 % in the baseline "
        "window, 5.0 times (per-minute means; Mann-Whitney p "
    )


def test_noise_raises_nothing_over_twenty_routes_and_many_releases() -> None:
    cfg = PolicySettings()
    alarms = 0
    for release in range(15):
        routes = tuple(
            RouteWindows(
                f"GET /r{i}",
                minutes(steady(100 + 20 * i, 40, seed=release * 100 + i)),
                minutes(steady(100 + 20 * i, 40, seed=release * 100 + i + 50)),
            )
            for i in range(20)
        )
        alarms += bool(route_regressions(RouteFacts("1.1.0", routes), cfg))
    assert alarms == 0


def test_the_confidence_is_shared_by_the_comparisons_made() -> None:
    # A shift of p = 0.011: a regression on its own (alpha 0.05 over 2 comparisons), not
    # among 20 routes' 40 comparisons (0.05 / 40).
    base = [200.0 + (i * 37) % 60 for i in range(30)]
    shifted = RouteWindows(CART, minutes([v + 12 for v in base]), minutes(base))
    any_rise = {"response_time_p95": MetricSettings(label="p95", unit="ms", allowed_ratio=1.0)}
    cfg = PolicySettings(route_metric_settings=any_rise)
    [alone] = judge_routes(RouteFacts("1.1.0", (shifted,)), cfg)
    assert alone.metric.outcome == "fail" and alone.comparisons == 1
    assert 0.01 < (alone.metric.p_value or 0) < 0.05
    others = tuple(
        RouteWindows(f"GET /r{i}", minutes(steady(100, seed=i)), minutes(steady(100, seed=i + 50)))
        for i in range(19)
    )
    many = judge_routes(RouteFacts("1.1.0", (shifted, *others)), cfg)
    assert len(many) == 20 and all(j.comparisons == 20 for j in many)
    cart = next(j for j in many if j.route.route == CART)
    assert (cart.metric.outcome, cart.metric.reason) == ("pass", "not_significant")
    assert route_regressions(RouteFacts("1.1.0", (shifted, *others)), cfg) == []


def test_quiet_routes_and_short_windows_are_not_judged_and_say_nothing() -> None:
    slow, fast = [900.0] * 30, [100.0] * 30
    cfg = PolicySettings()
    cases = {
        # Four requests a minute: under route_minute_min_requests (5).
        "quiet": RouteWindows(CART, minutes(slow, requests=4), minutes(fast, requests=4)),
        # 19 minutes since the deploy: under route_min_minutes (20).
        "short": RouteWindows(CART, minutes(slow[:19]), minutes(fast)),
        "no baseline": RouteWindows(CART, minutes(slow), ()),
    }
    for name, route in cases.items():
        assert judge_routes(RouteFacts("1.1.0", (route,)), cfg) == [], name
        assert route_regressions(RouteFacts("1.1.0", (route,)), cfg) == [], name
    assert route_regressions(None, cfg) == []


def test_only_the_busiest_routes_are_judged_and_the_level_is_a_setting() -> None:
    slow = RouteWindows(CART, minutes([900.0] * 30, requests=6), minutes([100.0] * 30))
    busy = tuple(
        RouteWindows(f"GET /r{i}", minutes(steady(100, seed=i), requests=50), minutes(steady(100)))
        for i in range(3)
    )
    facts = RouteFacts("1.1.0", (slow, *busy))
    assert route_regressions(facts, PolicySettings(route_max_routes=3)) == []
    [signal] = route_regressions(
        facts, PolicySettings(route_max_routes=4, route_regression_level="low")
    )
    assert (signal.level, signal.figure) == ("low", CART)


def test_more_regressions_than_are_named_are_counted_largest_first() -> None:
    routes = tuple(
        RouteWindows(f"GET /r{i}", minutes([300.0 * (i + 2)] * 30), minutes([150.0] * 30))
        for i in range(5)
    )
    [signal] = route_regressions(RouteFacts("1.1.0", routes), PolicySettings())
    assert signal.detail.startswith("GET /r4: p95 1,800 ms")
    assert signal.detail.endswith("; and 2 more route regressions")
    assert signal.figure == "GET /r0, GET /r1, GET /r2 and 2 more"
