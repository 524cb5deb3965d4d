"""The bookkeeping of one agent run (`RunState`) and the rules the loop reads from it.

`agent.loop.Agent.send_message` makes one `RunState` per call and advances it step by step;
the functions here decide from it, without side effects beyond the state itself: whether a
cap is passed (`check_caps`), whether the same tool call keeps failing the same way
(`count_repeated_failure`), whether a text-only reply gets a nudge (`needs_nudge`), and
whether an answer was cut off at the output limit with nothing usable (`cut_off`). Also the
history's upkeep: the "not run" results that keep every tool call answered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from agent.errors import RunLimitExceeded
from agent.events import ReportFiled
from agent.messages import Conversation, Message, ToolCall, ToolResult, Usage
from agent.providers.protocol import ModelResponse
from agent.providers.wire import RAW_ARGUMENTS_KEY
from agent.repetition import failure_reason
from agent.run_config import AgentConfig

# A reply that announces its next action instead of taking it.
_ANNOUNCES_ACTION = re.compile(
    r"\b(i will|i'll|i am going to|i'm going to|let me|let's|i need to|i shall|"
    r"next,? i|now i)\b",
    re.IGNORECASE,
)


class RunState:
    """The bookkeeping of one `send_message` call."""

    __slots__ = (
        "cut_off",
        "cut_offs",
        "ended_by_tool",
        "failure_repeats",
        "final_text",
        "flushed_at",
        "last_failure",
        "last_tool_failed",
        "nudges",
        "output_chars",
        "partial_text",
        "pending_text",
        "report_filed",
        "steps",
        "text_chars",
        "tool_calls",
        "usage",
    )

    def __init__(self) -> None:
        self.steps = 0
        self.usage = Usage()
        self.nudges = 0
        self.tool_calls = 0
        self.last_tool_failed = False
        # The last failure (tool, error type, reason) and how often in a row it happened.
        self.last_failure: tuple[str, str, str] | None = None
        self.failure_repeats = 0
        self.report_filed = False
        # A tool said nothing more can be done (a failure with `terminal=True`).
        self.ended_by_tool = False
        self.partial_text = ""
        self.final_text = ""
        # Answers cut off at the output limit, and whether the last step's was.
        self.cut_offs = 0
        self.cut_off = False
        self.text_chars = 0
        self.output_chars = 0
        # Streamed text not yet saved as an event, and when the last TextDelta was saved.
        self.pending_text = ""
        self.flushed_at = 0.0


def check_caps(run: RunState, config: AgentConfig) -> None:
    if run.text_chars > config.max_text_chars:
        raise RunLimitExceeded(
            f"Stopped: the model streamed more than {config.max_text_chars:,} characters of "
            "text in this run (DETECTIVE_MAX_RUN_TEXT_CHARS)"
        )
    if run.output_chars > config.max_output_chars:
        raise RunLimitExceeded(
            f"Stopped: the model's output passed {config.max_output_chars:,} characters in "
            "this run (DETECTIVE_MAX_RUN_OUTPUT_CHARS)"
        )


def count_repeated_failure(
    run: RunState, config: AgentConfig, call: ToolCall, result: ToolResult
) -> None:
    if result.success:
        run.last_failure, run.failure_repeats = None, 0
        return
    # The same reason, whatever the arguments: a model that changes one finding but not
    # what was wrong repeats itself (issue 40; `agent.repetition`).
    failure = (call.name, result.error_type or "", failure_reason(result.content))
    run.failure_repeats = run.failure_repeats + 1 if failure == run.last_failure else 1
    run.last_failure = failure
    if run.failure_repeats >= config.max_repeated_tool_failures:
        # The run's answer says plainly why it stopped, in the tool's own words.
        # No count in it: a figure in the answer must come from the release data.
        run.final_text = (
            f"Stopped: {call.name} kept failing with the same error, so the run ends "
            f"here. {result.content}"
        )


def needs_nudge(
    run: RunState,
    config: AgentConfig,
    reply: Message,
    tool_names: set[str],
    history: Sequence[Message],
) -> bool:
    """Whether a text-only reply interrupted an investigation.

    It did when tools are on offer, nudges remain, no report was filed in this run,
    the last tool did not fail (a model reporting a missing release is right to stop
    there) and either the reply announces an action it did not take, or tools already
    ran in this run (or the run assesses a release: `config.assessing`) while the report,
    available, was never filed in this conversation (the model wrote its assessment instead
    of filing it).
    """
    if run.nudges >= config.max_text_only_nudges or run.report_filed:
        return False
    if run.last_tool_failed or not tool_names:
        return False
    if _ANNOUNCES_ACTION.search(reply.content):
        return True
    return (
        (run.tool_calls > 0 or config.assessing)
        and config.report_tool in tool_names
        and not _report_filed_before(history, config.report_tool)
    )


def _report_filed_before(history: Sequence[Message], report_tool: str) -> bool:
    return any(m.role == "tool" and m.name == report_tool and not m.is_error for m in history)


def cut_off(response: ModelResponse) -> bool:
    """Whether the answer stopped at the output limit with nothing usable: no tool call, or
    one whose arguments did not parse. A complete call before the limit still runs."""
    if response.finish_reason != "length":
        return False
    calls = response.message.tool_calls
    return not calls or any(RAW_ARGUMENTS_KEY in call.arguments for call in calls)


def output_size(response: ModelResponse) -> int:
    message = response.message
    return len(message.content or "") + sum(
        len(json.dumps(call.arguments, default=str)) for call in message.tool_calls
    )


def usage_total(conversation: Conversation) -> Usage:
    saved = conversation.metadata.get("usage")
    return Usage.model_validate(saved) if saved else Usage()


def not_run(calls: Sequence[ToolCall], reason: str) -> list[Message]:
    """A result for each call that will not run, so that the history stays valid: providers
    require every call of an assistant message to be answered."""
    return [
        Message.tool(
            ToolResult(
                tool_call_id=call.id,
                name=call.name,
                content=reason,
                success=False,
                error_type="NotRun",
            )
        )
        for call in calls
    ]


def unanswered_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """The calls of the last assistant message that have no result (the run's task was
    cancelled mid-tool)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "assistant":
            answered = {m.tool_call_id for m in messages[index + 1 :] if m.role == "tool"}
            return [c for c in messages[index].tool_calls if c.id not in answered]
    return []


def report_event(call: ToolCall, result: ToolResult) -> ReportFiled:
    data: dict[str, Any] = {**call.arguments, **(result.data or {})}
    findings = data.get("findings") or []
    if isinstance(findings, str):
        findings = [findings]
    return ReportFiled(
        release_id=str(data.get("release_id", "")),
        severity=str(data.get("severity", "")),
        findings=[str(f) for f in findings],
        report_id=str(data["report_id"]) if data.get("report_id") else None,
        summary=str(data.get("summary") or ""),
    )
