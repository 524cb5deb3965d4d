from __future__ import annotations

import pytest
from opentelemetry import trace

from agent.telemetry.trace_context import (
    conversation_parent,
    current_traceparent,
    new_trace_id,
    parse_trace_id,
)
from agent.testing.telemetry import (
    Telemetry,
    span_id,
    trace_id,
)


def test_new_trace_id_is_32_hex_digits() -> None:
    ids = {new_trace_id() for _ in range(20)}
    assert len(ids) == 20
    assert all(parse_trace_id(value) for value in ids)


@pytest.mark.parametrize("value", [None, 12, "abc", "0" * 32, "z" * 32, "a" * 31])
def test_parse_trace_id_rejects_what_is_not_a_trace_id(value: object) -> None:
    assert parse_trace_id(value) is None


def test_current_traceparent(otel: Telemetry) -> None:
    assert current_traceparent() == {}
    with otel.tracer.start_as_current_span("request") as span:
        headers = current_traceparent()
    tid = trace.format_trace_id(trace_id(span))
    sid = trace.format_span_id(span_id(span))
    assert list(headers) == ["traceparent"]
    version, header_trace, header_span, flags = headers["traceparent"].split("-")
    assert (version, header_trace, header_span) == ("00", tid, sid)
    assert int(flags, 16) & 1  # sampled


def test_conversation_parent_without_ids_is_the_current_context() -> None:
    assert conversation_parent({}) == (None, [])


def test_conversation_parent_ignores_an_invalid_traceparent() -> None:
    stored = new_trace_id()
    parent, links = conversation_parent({"trace_id": stored, "traceparent": "garbage"})
    assert parent is not None
    assert links == []
    remote = trace.get_current_span(parent).get_span_context()
    assert trace.format_trace_id(remote.trace_id) == stored
    assert remote.is_remote
