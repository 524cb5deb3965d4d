from __future__ import annotations

import json

import pytest
from opentelemetry import trace

from agent.telemetry.trace_context import (
    conversation_parent,
    current_traceparent,
    end_workflow,
    new_trace_id,
    parse_trace_id,
    workflow_span,
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


@pytest.mark.parametrize(("error", "code"), [(None, "OK"), ("no verdict was stored", "ERROR")])
def test_a_workflow_root_is_a_chain_with_the_release_in_and_the_verdict_out(
    otel: Telemetry, error: str | None, code: str
) -> None:
    root = workflow_span(
        otel.tracer,
        "assessment",
        conversation_id="run-1",
        release_id="v1.0.0",
        input_value={"release_id": "v1.0.0", "changes": ["Fix typo"]},
    )
    end_workflow(root, output={"state": "filed", "verdict": {"severity": "high"}}, error=error)
    root.end()
    span = otel.one("invoke_workflow assessment")
    attributes = dict(span.attributes or {})
    assert attributes["openinference.span.kind"] == "CHAIN"
    assert json.loads(str(attributes["input.value"]))["changes"] == ["Fix typo"]
    assert json.loads(str(attributes["output.value"]))["verdict"] == {"severity": "high"}
    assert attributes["output.mime_type"] == "application/json"
    assert span.status.status_code.name == code
    assert span.status.description == error
