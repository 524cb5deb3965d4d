"""Sample traces of an error group: the spans of a few of its exemplar traces, so that the
drill-down, the agent and the release page can show what the failing request did (which calls,
how long each took, which one failed) without Detective keeping every span.

Bounded: at most `SAMPLE_TRACES` traces per error group and release, each with at most
`SAMPLE_SPANS` of its spans (the failing ones and the root first, then by start); how many
spans the trace had in the request is kept beside them (`spans_seen`). Only the spans of the
request that carried the error are read: an SDK's batch processor exports a request's spans
together as they end within its delay (5 s by default), so a child span exported in an earlier
batch is missing from the sample, and `spans_seen` says how many were read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from traces.otlp.spans import SpanFacts, text_ok

__all__ = ["SAMPLE_SPANS", "SAMPLE_TRACES", "merge_samples", "sample_traces"]

SAMPLE_TRACES = 2
SAMPLE_SPANS = 30
MAX_NAME = 200

_KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
_STATUS = {0: "unset", 1: "ok", 2: "error"}


def _name(name: str) -> str:
    """A span's name as a sample shows it: cut, and left out when it cannot be stored (a name
    is no reason to refuse the span)."""
    name = name[:MAX_NAME]
    return name if text_ok(name) else ""


def _parent(span: SpanFacts) -> bytes:
    return bytes(span.raw.parent_span_id) if span.raw is not None else b""


def _shown(span: SpanFacts, start_ns: int) -> dict[str, Any]:
    raw = span.raw
    parent = _parent(span)
    return {
        "span_id": bytes(raw.span_id).hex() if raw is not None else "",
        "parent_span_id": parent.hex() if len(parent) == 8 else "",
        "name": _name(raw.name) if raw is not None else "",
        "kind": _KINDS.get(raw.kind if raw is not None else 0, "unspecified"),
        "start_ms": round((span.start_ns - start_ns) / 1e6, 3),
        "duration_ms": round(span.duration_ms, 3),
        "status": _STATUS.get(raw.status.code if raw is not None else 0, "unset"),
        "error": span.error,
        "exception": span.exceptions[0].type if span.exceptions else "",
    }


def _trace(trace_id: str, spans: Sequence[SpanFacts]) -> dict[str, Any]:
    # The failing spans and the root first: they are what a reader looks for in a cut trace.
    kept = sorted(spans, key=lambda s: (not s.error, bool(_parent(s)), s.start_ns))[:SAMPLE_SPANS]
    kept.sort(key=lambda s: s.start_ns)
    start_ns = min(s.start_ns for s in spans)
    return {
        "trace_id": trace_id,
        "spans": [_shown(s, start_ns) for s in kept],
        "spans_seen": len(spans),
    }


def sample_traces(
    spans: Iterable[SpanFacts], wanted: Mapping[str, Sequence[str]]
) -> dict[str, list[dict[str, Any]]]:
    """Per error group (fingerprint), the sample traces of `wanted` (fingerprint -> trace ids,
    at most `SAMPLE_TRACES` each) read from `spans`."""
    traces = {t for ids in wanted.values() for t in ids[:SAMPLE_TRACES]}
    if not traces:
        return {}
    found: dict[str, list[SpanFacts]] = defaultdict(list)
    for span in spans:
        if not span.log and span.trace_id in traces:
            found[span.trace_id].append(span)
    return {
        fingerprint: [_trace(t, found[t]) for t in ids[:SAMPLE_TRACES] if found.get(t)]
        for fingerprint, ids in wanted.items()
    }


def merge_samples(
    stored: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The stored samples, then new ones of other traces, up to `SAMPLE_TRACES`."""
    if len(stored) >= SAMPLE_TRACES or not new:
        return list(stored)
    have = {s.get("trace_id") for s in stored}
    return [*stored, *(s for s in new if s.get("trace_id") not in have)][:SAMPLE_TRACES]
