"""Trace context: one trace per conversation, whatever process resumes it; the workflow span
at the root of a run; the W3C headers the tools send.

The conversation's metadata keeps `trace_id` (and `traceparent` when a traced web request
started the run); every send_message span is created in that trace, so a conversation resumed
days later, in another process, still lands in the same trace file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent.telemetry.wrapping import STATUS_DESCRIPTION_LIMIT

_propagator = TraceContextTextMapPropagator()
_ids = RandomIdGenerator()


# OpenInference's names (what Arize Phoenix reads): the span's kind, its input and output.
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
INPUT_VALUE, INPUT_MIME_TYPE = "input.value", "input.mime_type"
OUTPUT_VALUE, OUTPUT_MIME_TYPE = "output.value", "output.mime_type"
JSON_MIME_TYPE = "application/json"


def workflow_span(
    tracer: trace.Tracer,
    workflow: str,
    *,
    conversation_id: str,
    release_id: str,
    context: Context | None = None,
    attributes: Mapping[str, Any] | None = None,
    input_value: Mapping[str, Any] | None = None,
) -> Span:
    """The root of a run's spans (an assessment, an eval trial): an `invoke_workflow` span,
    an OpenInference CHAIN, with the release and the run on it and, as its input, the
    release (`input_value`, JSON; the release id alone when not given). `end_workflow` gives
    it its output and status.

    No `gen_ai.agent.*` attribute here: it would make viewers take the span for an agent."""
    values: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": workflow,
        "gen_ai.conversation.id": conversation_id,
        "session.id": conversation_id,
        "detective.run.id": conversation_id,
        "detective.release.id": release_id,
        OPENINFERENCE_SPAN_KIND: "CHAIN",
        INPUT_VALUE: _json(input_value if input_value is not None else {"release_id": release_id}),
        INPUT_MIME_TYPE: JSON_MIME_TYPE,
    }
    if attributes:
        values.update(attributes)
    return tracer.start_span(
        f"invoke_workflow {workflow}", context=context, kind=SpanKind.INTERNAL, attributes=values
    )


def end_workflow(span: Span, *, output: Mapping[str, Any], error: str | None) -> None:
    """The run's outcome on its root span: the output (the verdict and its state, JSON) and
    the status, ERROR with `error` as its description for a run that failed or stored no
    verdict, so that a trace list shows it as failed. The caller ends the span."""
    span.set_attributes({OUTPUT_VALUE: _json(output), OUTPUT_MIME_TYPE: JSON_MIME_TYPE})
    if error:
        span.set_status(Status(StatusCode.ERROR, error[:STATUS_DESCRIPTION_LIMIT]))
    else:
        span.set_status(Status(StatusCode.OK))


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def new_trace_id() -> str:
    """A fresh W3C trace id: 32 lower-case hex digits, never all zeros."""
    return trace.format_trace_id(_ids.generate_trace_id())


def current_traceparent() -> dict[str, str]:
    """The current trace context as W3C headers (`traceparent`, and `tracestate` when
    set), for outgoing HTTP calls; empty when no span is active."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier


def parse_trace_id(value: object) -> int | None:
    if not isinstance(value, str) or len(value) != 32:
        return None
    try:
        trace_id = int(value, 16)
    except ValueError:
        return None
    return trace_id or None


def conversation_parent(
    metadata: Mapping[str, Any],
) -> tuple[Context | None, list[Link]]:
    """The parent context for a span of this conversation, and links to add.

    - `traceparent` stored (a traced web request started the run): that request's span
      is the parent, as long as it belongs to the conversation's trace.
    - Otherwise the stored `trace_id`: a remote parent with that trace id and a random
      span id, so every send_message of the conversation joins the one trace.
    - Neither: None, the current context (a new trace unless a span is active).

    A traceparent from another trace than the conversation's becomes a link: the
    conversation keeps its one trace, and the request that caused the run stays findable.
    """
    trace_id = parse_trace_id(metadata.get("trace_id"))
    links: list[Link] = []
    traceparent = metadata.get("traceparent")
    if isinstance(traceparent, str) and traceparent:
        carrier = {"traceparent": traceparent}
        tracestate = metadata.get("tracestate")
        if isinstance(tracestate, str) and tracestate:
            carrier["tracestate"] = tracestate
        extracted = _propagator.extract(carrier)
        remote = trace.get_current_span(extracted).get_span_context()
        if remote.is_valid:
            if trace_id is None or remote.trace_id == trace_id:
                return extracted, links
            links.append(Link(remote, {"detective.link.reason": "traceparent"}))
    if trace_id is not None:
        parent = NonRecordingSpan(
            SpanContext(
                trace_id=trace_id,
                span_id=_ids.generate_span_id(),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
        )
        return trace.set_span_in_context(parent), links
    return None, links
