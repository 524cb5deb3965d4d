from __future__ import annotations

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from traces.otlp.samples import SAMPLE_SPANS, SAMPLE_TRACES, merge_samples, sample_traces
from traces.otlp.spans import ExceptionFacts, SpanFacts

T0 = 1_800_000_000 * 10**9


def fact(trace: int, n: int, *, parent: int | None = None, error: bool = False) -> SpanFacts:
    return SpanFacts(
        service="shop",
        version="1.1.0",
        environment="",
        trace_id=f"{trace:032x}",
        route="GET /cart",
        request=parent is None,
        start_ns=T0 + n * 10**6,
        duration_ms=2.0,
        error=error,
        exceptions=(ExceptionFacts("KeyError", "'sku'", ""),) if error else (),
        raw=Span(
            span_id=(n + 1).to_bytes(8, "big"),
            parent_span_id=(parent + 1).to_bytes(8, "big") if parent is not None else b"",
            name=f"span {n}" if n < 60 else f"span {n}\x00",
            kind=2 if parent is None else 3,
            status=Status(code=2 if error else 0),
        ),
    )


def test_a_sample_keeps_the_failing_span_and_the_root_of_a_long_trace_in_start_order() -> None:
    spans = [fact(1, 0)] + [fact(1, n, parent=0) for n in range(1, 60)]
    spans.append(fact(1, 60, parent=0, error=True))
    spans.append(fact(2, 0))  # another trace: not asked for
    [sample] = sample_traces(spans, {"fp": [f"{1:032x}"]})["fp"]
    assert sample["spans_seen"] == 61 and len(sample["spans"]) == SAMPLE_SPANS
    first, last = sample["spans"][0], sample["spans"][-1]
    assert (first["name"], first["kind"], first["parent_span_id"]) == ("span 0", "server", "")
    # A name holding a NUL is left out, the span kept.
    assert (last["name"], last["error"], last["exception"], last["status"]) == (
        "",
        True,
        "KeyError",
        "error",
    )
    assert last["parent_span_id"] == first["span_id"] and last["start_ms"] == 60.0
    assert [s["start_ms"] for s in sample["spans"]] == sorted(
        s["start_ms"] for s in sample["spans"]
    )


def test_at_most_a_few_traces_a_group_and_stored_samples_stay() -> None:
    spans = [fact(t, 0, error=True) for t in range(1, 5)]
    ids = [f"{t:032x}" for t in range(1, 5)]
    found = sample_traces(spans, {"fp": ids})["fp"]
    assert [s["trace_id"] for s in found] == ids[:SAMPLE_TRACES]
    stored = found[:1]
    assert merge_samples(stored, found) == found
    assert merge_samples(found, [{"trace_id": "x"}]) == found
