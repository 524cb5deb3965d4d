"""One release's spans of a request folded into what is kept: per route, minute and window
(baseline: before the release's deploy time; release: from it) the requests, the errors and a
latency sketch (DDSketch, mergeable, 1 % relative accuracy); per error group its counts per
route, minute and window, when it was first and last seen, a sample and a few exemplar trace
ids. The `traces` app merges these into its tables; no span is kept."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ddsketch import DDSketch

from traces.otlp.grouping import Grouped, group_of
from traces.otlp.samples import sample_traces
from traces.otlp.spans import ExceptionFacts, SpanFacts

__all__ = ["ErrorAggregate", "ReleaseAggregate", "RouteMinute", "aggregate", "new_sketch"]

Window = Literal["baseline", "release"]
RELATIVE_ACCURACY = 0.01
EXEMPLARS = 5
MINUTE_NS = 60 * 10**9


def new_sketch() -> DDSketch:
    return DDSketch(RELATIVE_ACCURACY)


@dataclass(slots=True)
class RouteMinute:
    requests: int = 0
    errors: int = 0
    sketch: DDSketch = field(default_factory=new_sketch)


@dataclass(slots=True)
class ErrorAggregate:
    grouped: Grouped
    sample: ExceptionFacts
    first_ns: int
    last_ns: int
    # (route, minute, window) -> occurrences
    counts: dict[tuple[str, int, Window], int] = field(default_factory=dict)
    exemplars: list[str] = field(default_factory=list)
    # A few exemplar traces with their spans (`traces.otlp.samples`).
    samples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(slots=True)
class ReleaseAggregate:
    # (route, minute, window) -> figures; minute is minutes since the epoch.
    routes: dict[tuple[str, int, Window], RouteMinute] = field(default_factory=dict)
    errors: dict[str, ErrorAggregate] = field(default_factory=dict)
    spans: int = 0
    log_records: int = 0


def window_of(start_ns: int, deployed_ns: int | None) -> Window:
    return "baseline" if deployed_ns is not None and start_ns < deployed_ns else "release"


def aggregate(spans: Sequence[SpanFacts], deployed_ns: int | None) -> ReleaseAggregate:
    """The figures of one release's spans; `deployed_ns` is its deploy time (None: never
    deployed, every span counts as the release's)."""
    result = ReleaseAggregate()
    for span in spans:
        result.spans += not span.log
        result.log_records += span.log
        minute = span.start_ns // MINUTE_NS
        window = window_of(span.start_ns, deployed_ns)
        if span.request and span.route:
            figures = result.routes.get((span.route, minute, window))
            if figures is None:
                figures = result.routes[(span.route, minute, window)] = RouteMinute()
            figures.requests += 1
            figures.errors += span.error
            figures.sketch.add(max(span.duration_ms, 0.0) or 1e-3)
        for exception in span.exceptions:
            grouped = group_of(exception.type, exception.message, exception.stacktrace)
            found = result.errors.get(grouped.fingerprint)
            if found is None:
                found = result.errors[grouped.fingerprint] = ErrorAggregate(
                    grouped, exception, span.start_ns, span.start_ns
                )
            found.first_ns = min(found.first_ns, span.start_ns)
            found.last_ns = max(found.last_ns, span.start_ns)
            key = (span.route, minute, window)
            found.counts[key] = found.counts.get(key, 0) + 1
            # A log record outside any trace has no trace id to show.
            fresh = span.trace_id and span.trace_id not in found.exemplars
            if fresh and len(found.exemplars) < EXEMPLARS:
                found.exemplars.append(span.trace_id)
    if result.errors:
        samples = sample_traces(
            spans, {key: found.exemplars for key, found in result.errors.items()}
        )
        for key, found in result.errors.items():
            found.samples = samples.get(key, [])
    return result
