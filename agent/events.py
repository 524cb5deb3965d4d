"""What an agent run reports while it works: a typed union of events.

The loop yields these as the run progresses; stores save them, the web page replays them,
the CLI prints them. Each has a `kind` that discriminates the union, so a saved event
comes back as the same class (`parse_event`).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter

from agent.messages import ToolCall, ToolResult, Usage, utcnow


def _finite_or_zero(value: float) -> float:
    return value if math.isfinite(value) else 0.0


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


# Every figure in an event is finite: a NaN or infinity (a provider's header, a division by
# zero) becomes 0.0 in a required field, None in one that may be missing. The saved event is
# JSON, which has neither, and the database's JSON check refuses them. On the float fields
# alone: a validator on every field ("*") was a Python call per field of every event.
RequiredFigure = Annotated[float, AfterValidator(_finite_or_zero)]
OptionalFigure = Annotated[float, AfterValidator(_finite_or_none)]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    timestamp: datetime = Field(default_factory=utcnow)


class RunStarted(_Event):
    kind: Literal["run_started"] = "run_started"
    conversation_id: str
    provider: str
    model: str
    trace_id: str | None = None
    reasoning: str = "direct"


class ModelRequestStarted(_Event):
    kind: Literal["model_request_started"] = "model_request_started"
    step: int
    message_count: int
    estimated_input_tokens: int  # the prompt as sent, system prompt included
    # The model's context window, so a page can say how full it is (None in older runs).
    context_window: int | None = None


class TextDelta(_Event):
    kind: Literal["text_delta"] = "text_delta"
    step: int
    text: str


class ModelResponded(_Event):
    """A model call finished: its whole text, the tool calls it asked for, why it stopped."""

    kind: Literal["model_responded"] = "model_responded"
    step: int
    text: str
    tool_call_count: int
    finish_reason: str | None = None
    response_model: str | None = None
    duration_ms: OptionalFigure = 0.0


class ToolCallRequested(_Event):
    kind: Literal["tool_call"] = "tool_call"
    step: int
    tool_call: ToolCall


class ToolResultReceived(_Event):
    kind: Literal["tool_result"] = "tool_result"
    step: int
    result: ToolResult


class ContextTrimmed(_Event):
    kind: Literal["context_trimmed"] = "context_trimmed"
    strategy: str
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    budget: int
    utilisation: RequiredFigure


class RetryScheduled(_Event):
    kind: Literal["retry_scheduled"] = "retry_scheduled"
    attempt: int  # the attempt that failed, counting from 1
    max_attempts: int
    delay_s: RequiredFigure
    reason: str
    error_type: str
    # True when a stream had already produced output that the retry throws away.
    partial_discarded: bool = False


class UsageReported(_Event):
    kind: Literal["usage"] = "usage"
    step: int
    usage: Usage
    total: Usage
    estimated_cost_usd: OptionalFigure | None = None


class ReportFiled(_Event):
    kind: Literal["report_filed"] = "report_filed"
    release_id: str
    severity: str
    findings: list[str]
    report_id: str | None = None
    summary: str = ""


class RunFinished(_Event):
    kind: Literal["run_finished"] = "run_finished"
    # "answered": the model replied without tool calls; "report_filed": the report ended it;
    # "tool_failing": the same tool call failed the same way several times in a row, or a
    # tool failed saying nothing more can be done (the release's summary cannot be read);
    # "max_steps": the step limit was reached before any of these; "output_limit": the
    # model's answer was cut off at the output limit again after being asked to be brief.
    reason: Literal["answered", "report_filed", "tool_failing", "max_steps", "output_limit"]
    final_text: str = ""
    steps: int = 0
    usage: Usage = Field(default_factory=Usage)


class RunFailed(_Event):
    kind: Literal["run_failed"] = "run_failed"
    error_type: str
    message: str
    steps: int = 0


class RunCancelled(_Event):
    kind: Literal["run_cancelled"] = "run_cancelled"
    reason: str = "cancelled"
    steps: int = 0


AgentEvent = Annotated[
    RunStarted
    | ModelRequestStarted
    | TextDelta
    | ModelResponded
    | ToolCallRequested
    | ToolResultReceived
    | ContextTrimmed
    | RetryScheduled
    | UsageReported
    | ReportFiled
    | RunFinished
    | RunFailed
    | RunCancelled,
    Field(discriminator="kind"),
]

TERMINAL_KINDS = frozenset({"run_finished", "run_failed", "run_cancelled"})

_adapter: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)


def parse_event(data: dict[str, Any] | str | bytes) -> AgentEvent:
    """Rebuild an event from its JSON form (a dict or the raw JSON text)."""
    if isinstance(data, dict):
        return _adapter.validate_python(data)
    return _adapter.validate_json(data)


def dump_event(event: AgentEvent) -> dict[str, Any]:
    return event.model_dump(mode="json")
