from __future__ import annotations

from traces.otlp.aggregate import MINUTE_NS, aggregate
from traces.otlp.grouping_test import stack
from traces.otlp.spans import ExceptionFacts, SpanFacts

T0 = 1_800_000_000 * 10**9


def span(
    start: int, route: str = "GET /cart/{id}/total", ms: float = 10.0, error: bool = False
) -> SpanFacts:
    exceptions = (
        (ExceptionFacts("ZeroDivisionError", "division by zero", stack()),) if error else ()
    )
    return SpanFacts(
        service="shop",
        version="1.1.0",
        environment="",
        trace_id=f"{start:032x}",
        route=route,
        request=True,
        start_ns=start,
        duration_ms=ms,
        error=error,
        exceptions=exceptions,
    )


def test_requests_errors_and_latency_per_route_minute_and_window() -> None:
    deployed = T0 + 2 * MINUTE_NS
    spans = [span(T0 + i * 10**9, ms=10.0) for i in range(30)]  # baseline, minute 0
    spans += [span(deployed + i * 10**9, ms=100.0, error=i % 6 == 0) for i in range(60)]
    spans += [span(deployed + 5, route="GET /health", ms=1.0)]
    result = aggregate(spans, deployed)
    assert result.spans == 91
    minute = T0 // MINUTE_NS
    baseline = result.routes[("GET /cart/{id}/total", minute, "baseline")]
    assert (baseline.requests, baseline.errors) == (30, 0)
    released = result.routes[("GET /cart/{id}/total", minute + 2, "release")]
    assert (released.requests, released.errors) == (60, 10)
    # DDSketch's 1 % relative accuracy.
    assert abs(released.sketch.get_quantile_value(0.95) - 100.0) <= 1.0
    assert result.routes[("GET /health", minute + 2, "release")].requests == 1
    [group] = result.errors.values()
    assert group.total == 10
    assert group.counts == {("GET /cart/{id}/total", minute + 2, "release"): 10}
    assert group.first_ns == deployed and group.last_ns == deployed + 54 * 10**9
    assert len(group.exemplars) == 5
    assert group.grouped.exception_type == "ZeroDivisionError"


def test_a_release_never_deployed_has_no_baseline() -> None:
    result = aggregate([span(T0)], None)
    assert {window for _, _, window in result.routes} == {"release"}
