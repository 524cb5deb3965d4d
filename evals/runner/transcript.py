"""What one agent run left behind, as the evaluators read it.

A `Transcript` is plain data: the conversation's messages, the run's events, the report the
site stored (if the runner read it back) and the run's error (if any). The runner builds it
from what it saved; the tests build it from hand-written JSON under `evals/testdata/`.

Where the same fact can come from two places, one rule decides:

- tool calls and results: from the events when they hold any `tool_call` event (the events
  are the complete log of the run), otherwise from the messages;
- the filed report: the stored report, else the last `report_filed` event, else the last
  successful `file_risk_report` call's arguments;
- the final text: `run_finished.final_text`, else the last assistant message with text;
- the error: the explicit `error`, else the run's `run_failed` / `run_cancelled` event.

A provider failure (rate limit, 5xx, network, timeout, bad key) or a cancellation makes the
trial *errored*: nothing can be said about the agent's behaviour. Any other failure (a crash
in the agent's own code, an exception the loop did not expect) is the agent's fault and makes
the trial *failed*.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent import errors as agent_errors
from agent.events import (
    AgentEvent,
    ReportFiled,
    RunCancelled,
    RunFailed,
    RunFinished,
    ToolCallRequested,
    ToolResultReceived,
    UsageReported,
)
from agent.messages import Message, ToolCall, ToolResult, Usage
from evals.scenario import REPORT_TOOL

ErrorCategory = Literal["provider", "cancelled", "infrastructure", "agent"]


def _subclass_names(cls: type) -> set[str]:
    names = {cls.__name__}
    for sub in cls.__subclasses__():
        names |= _subclass_names(sub)
    return names


# Error type names that mean "the model provider failed", from the agent's own error tree.
PROVIDER_ERROR_TYPES: frozenset[str] = frozenset(_subclass_names(agent_errors.ProviderError))
INFRASTRUCTURE_ERROR_TYPES: frozenset[str] = frozenset(
    {agent_errors.ConfigurationError.__name__, "EvalInfrastructureError"}
)
CANCELLED_ERROR_TYPES: frozenset[str] = frozenset({"RunCancelledError", "CancelledError"})


class RunError(BaseModel):
    """Why a run did not finish. `category` may be given; otherwise it follows `error_type`."""

    model_config = ConfigDict(frozen=True)

    error_type: str
    message: str = ""
    category: ErrorCategory | None = None

    @property
    def resolved_category(self) -> ErrorCategory:
        if self.category is not None:
            return self.category
        if self.error_type in PROVIDER_ERROR_TYPES:
            return "provider"
        if self.error_type in CANCELLED_ERROR_TYPES:
            return "cancelled"
        if self.error_type in INFRASTRUCTURE_ERROR_TYPES:
            return "infrastructure"
        return "agent"

    @property
    def is_agent_fault(self) -> bool:
        """A crash of the agent itself: the trial failed, rather than errored."""
        return self.resolved_category == "agent"


class FiledReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    release_id: str
    severity: str
    findings: list[str] = Field(default_factory=list)
    summary: str = ""
    report_id: str | None = None
    # The policy's evidence the model left out, which the release API ends a stored report
    # with (kept apart: `findings` stay the model's). Empty when not read back from the API.
    policy_findings: list[str] = Field(default_factory=list)
    # The severity the release API's policy gave when the report was filed: for a scenario
    # made of files, judged with the release's history, which its summary alone does not show.
    policy_severity: str | None = None
    # What the release API found wrong with it when it was filed (None: not recorded).
    problems: list[str] | None = None

    @property
    def text(self) -> str:
        return "\n".join([*self.findings, self.summary])


class ToolInvocation(BaseModel):
    """One tool call and the result it got (None when no result was recorded)."""

    model_config = ConfigDict(frozen=True)

    index: int
    call: ToolCall
    result: ToolResult | None = None

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def succeeded(self) -> bool:
        return self.result is not None and self.result.success


class TrialMetrics(BaseModel):
    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    latency_ms: float | None = None
    steps: int = 0
    tool_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Transcript(BaseModel):
    model_config = ConfigDict(frozen=True)

    scenario_id: str | None = None
    messages: list[Message] = Field(default_factory=list)
    events: list[AgentEvent] = Field(default_factory=list)
    # The report as the site stored it, when the runner read it back.
    report: FiledReport | None = None
    error: RunError | None = None
    # Measured by the runner; derived from the events when absent.
    usage: Usage | None = None
    cost_usd: float | None = None
    duration_ms: float | None = None
    # The tools the agent was offered (None: not recorded): the drill-downs are the larger
    # models' profile's only, so a check that asks for one applies where it was offered.
    tools_offered: list[str] | None = None

    # -- tools ---------------------------------------------------------------------------

    def invocations(self) -> list[ToolInvocation]:
        """Every tool call in order, each with its result."""
        if any(isinstance(e, ToolCallRequested) for e in self.events):
            calls = [e.tool_call for e in self.events if isinstance(e, ToolCallRequested)]
            results = {
                e.result.tool_call_id: e.result
                for e in self.events
                if isinstance(e, ToolResultReceived)
            }
        else:
            calls = [c for m in self.messages if m.role == "assistant" for c in m.tool_calls]
            results = {
                m.tool_call_id: ToolResult(
                    tool_call_id=m.tool_call_id,
                    name=m.name or "",
                    content=m.content,
                    success=not m.is_error,
                    timestamp=m.timestamp,
                )
                for m in self.messages
                if m.role == "tool" and m.tool_call_id
            }
        return [
            ToolInvocation(index=i, call=call, result=results.get(call.id))
            for i, call in enumerate(calls)
        ]

    def tool_names(self) -> list[str]:
        return [inv.name for inv in self.invocations()]

    # -- the report ----------------------------------------------------------------------

    def filed_report(self) -> FiledReport | None:
        if self.report is not None:
            return self.report
        filed = [e for e in self.events if isinstance(e, ReportFiled)]
        if filed:
            last = filed[-1]
            return FiledReport(
                release_id=last.release_id,
                severity=last.severity,
                findings=list(last.findings),
                summary=last.summary,
                report_id=last.report_id,
            )
        for inv in reversed(self.invocations()):
            if inv.name == REPORT_TOOL and inv.succeeded:
                return _report_from_arguments(inv)
        return None

    def successful_filings(self) -> list[ToolInvocation]:
        return [i for i in self.invocations() if i.name == REPORT_TOOL and i.succeeded]

    # -- text and outcome ----------------------------------------------------------------

    def final_text(self) -> str:
        for event in reversed(self.events):
            if isinstance(event, RunFinished) and event.final_text.strip():
                return event.final_text
        for message in reversed(self.messages):
            if message.role == "assistant" and message.content.strip():
                return message.content
        return ""

    def user_prompt(self) -> str:
        return "\n".join(m.content for m in self.messages if m.role == "user")

    def run_error(self) -> RunError | None:
        if self.error is not None:
            return self.error
        for event in reversed(self.events):
            if isinstance(event, RunFailed):
                return RunError(error_type=event.error_type, message=event.message)
            if isinstance(event, RunCancelled):
                return RunError(
                    error_type="RunCancelledError", message=event.reason, category="cancelled"
                )
        return None

    @property
    def errored(self) -> bool:
        """The run ended in an error (of any kind, the agent's own included)."""
        return self.run_error() is not None

    def finish_reason(self) -> str | None:
        """ "answered", "report_filed", "tool_failing", "max_steps", "output_limit", or None
        when the run did not finish."""
        for event in reversed(self.events):
            if isinstance(event, RunFinished):
                return event.reason
        if self.events:
            return None
        # Messages only (a hand-written transcript): infer the ending from the last message.
        if self.run_error() is not None or not self.messages:
            return None
        if self.successful_filings():
            return "report_filed"
        last = self.messages[-1]
        return "answered" if last.role == "assistant" and not last.tool_calls else None

    def metrics(self) -> TrialMetrics:
        usage = self.usage
        cost = self.cost_usd
        steps = 0
        for event in reversed(self.events):
            if isinstance(event, RunFinished):
                usage = usage or event.usage
                steps = event.steps
                break
            if isinstance(event, RunFailed | RunCancelled):
                steps = event.steps
                break
        reports = [e for e in self.events if isinstance(e, UsageReported)]
        if usage is None and reports:
            usage = reports[-1].total
        if cost is None:
            # UsageReported.estimated_cost_usd is the cost of that one model call.
            costs = [e.estimated_cost_usd for e in reports if e.estimated_cost_usd is not None]
            cost = sum(costs) if costs else None
        latency = self.duration_ms
        if latency is None and len(self.events) >= 2:
            span = self.events[-1].timestamp - self.events[0].timestamp
            latency = span.total_seconds() * 1000
        usage = usage or Usage()
        return TrialMetrics(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=cost,
            latency_ms=latency,
            steps=steps,
            tool_calls=len(self.invocations()),
        )


def _report_from_arguments(inv: ToolInvocation) -> FiledReport:
    args = inv.call.arguments
    data = inv.result.data if inv.result is not None and inv.result.data else {}
    # What was filed: a brief filing cites evidence by key, and the tool files the sentences.
    findings = data.get("findings") or args.get("findings") or args.get("evidence") or []
    if isinstance(findings, str):
        findings = [findings]
    return FiledReport(
        release_id=str(args.get("release_id", "")),
        severity=str(args.get("severity", "")),
        findings=[str(f) for f in findings],
        summary=str(args.get("summary", "") or ""),
        report_id=str(data["report_id"]) if data.get("report_id") else None,
    )
