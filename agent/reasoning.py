"""How the model is asked to reason within one step of the loop: pluggable strategies.

A strategy receives the provider and the fitted request of one step and makes one or more
model calls. It yields the stream events of those calls as they arrive, so the loop can
relay text, tool-call deltas and retries, and it ends each model call with one
`StreamEnd`:

- every `StreamEnd` is one model call, with that call's usage (the loop reports each);
- the *last* `StreamEnd` is the step's answer: the assistant message the loop appends to
  the history and whose tool calls it runs;
- the *first* call's prompt starts with exactly the fitted messages, so the loop caches
  its input token count as the exact size of those messages.

Strategies never write to the history themselves: what they add to a call's prompt (a
planning or checking instruction) lives only in that call, and what they learnt is kept
in the answer's `metadata`. The loop stays the same whichever strategy runs.

Strategies, by name (`get_strategy`):

- ``direct``: one model call per step (the default).
- ``self_check``: when a response asks to file the risk report, one more call checks the
  severity against the guidelines and the data before anything is filed; see
  `SelfCheckStrategy`.
- ``plan``: the first step of a run first asks for a short plan, then acts on it; see
  `PlanThenInvestigate`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, Protocol, runtime_checkable

from agent.cancel import CancelToken
from agent.errors import ConfigurationError, StreamError
from agent.messages import Message, ToolCall
from agent.providers.protocol import (
    ModelRequest,
    ModelResponse,
    Provider,
    StreamEnd,
    StreamEvent,
)

REPORT_TOOL = "file_risk_report"


@runtime_checkable
class ReasoningStrategy(Protocol):
    @property
    def name(self) -> str: ...

    def respond(
        self,
        provider: Provider,
        request: ModelRequest,
        cancel: CancelToken | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Yield the events of this step's model calls, one `StreamEnd` per call; the
        last `StreamEnd` is the step's answer."""
        ...


async def stream_call(provider: Provider, request: ModelRequest) -> AsyncIterator[StreamEvent]:
    """One model call, streamed. The provider's stream is closed even when the consumer
    stops early (cancellation), so the HTTP response is released at once."""
    ended = False
    async with aclosing(provider.stream(request)) as stream:
        async for event in stream:
            ended = ended or isinstance(event, StreamEnd)
            yield event
    if not ended:
        raise StreamError(
            "The model's stream ended without a final response",
            provider=provider.name,
        )


async def _collect(
    provider: Provider, request: ModelRequest
) -> AsyncIterator[StreamEvent | ModelResponse]:
    """Like `stream_call`, but hands the final response over as a bare ModelResponse, so
    a strategy can decide what to yield as its own `StreamEnd`."""
    async for event in stream_call(provider, request):
        yield event.response if isinstance(event, StreamEnd) else event


class DirectStrategy:
    """One model call per step: the request as fitted, nothing added."""

    name = "direct"

    def respond(
        self,
        provider: Provider,
        request: ModelRequest,
        cancel: CancelToken | None = None,
    ) -> AsyncIterator[StreamEvent]:
        # The call's own stream, not a generator around it: one layer less per chunk.
        return stream_call(provider, request)


SELF_CHECK_INSTRUCTION = """\
Before this report is filed, check it. You are about to call {tool} with:
{arguments}

Compare the severity with the severity guidelines in your instructions and with the \
figures in the release summary you fetched: test failures (and whether they touch \
critical areas such as payments, authentication, security or data), the error rate \
(above 5% is high, 2% to 5% is medium, below 2% is low), latency, and the risk of the \
changes. Check that every finding cites only figures present in the summary.

Then call {tool} once: with the same arguments if they are right, or with the corrected \
severity and findings if they are not. Do not explain; call the tool."""


class SelfCheckStrategy:
    """Checks the severity once before the report is filed.

    A step runs as in `DirectStrategy`. When the response asks to call the report tool,
    one more model call is made before anything runs: its prompt is the same request plus
    a user message quoting the draft call's arguments and asking the model to check the
    severity against the guidelines and the data, then call the report tool again, with
    the same or corrected arguments. The step's answer is then:

    - the check's tool calls, when it made any (a revised or confirmed filing);
    - otherwise the draft's tool calls unchanged (the checker only talked).

    Its text is the draft's text followed by the check's. The answer's metadata records
    ``self_check = {"draft": <draft arguments>, "revised": <bool>}``. The draft's own
    `StreamEnd` is yielded too (it was a model call, and its usage counts), so a step
    that files a report reports two model calls.
    """

    name = "self_check"

    def __init__(
        self,
        report_tool: str = REPORT_TOOL,
        instruction: str = SELF_CHECK_INSTRUCTION,
    ) -> None:
        self.report_tool = report_tool
        self.instruction = instruction

    async def respond(
        self,
        provider: Provider,
        request: ModelRequest,
        cancel: CancelToken | None = None,
    ) -> AsyncIterator[StreamEvent]:
        draft: ModelResponse | None = None
        async for event in stream_call(provider, request):
            if isinstance(event, StreamEnd):
                draft = event.response
            yield event
        assert draft is not None  # stream_call raises when no StreamEnd came
        filing = self._filing(draft.message.tool_calls)
        if filing is None or (cancel is not None and cancel.is_set):
            return

        check_request = request.model_copy(
            update={
                "messages": [
                    *request.messages,
                    Message.user(self._check_prompt(filing), self_check=True),
                ]
            }
        )
        async for item in _collect(provider, check_request):
            if not isinstance(item, ModelResponse):
                yield item
                continue
            checked_calls = item.message.tool_calls
            calls = checked_calls or draft.message.tool_calls
            revised_call = self._filing(checked_calls)
            revised = revised_call is not None and (revised_call.arguments != filing.arguments)
            text = "\n\n".join(
                part for part in (draft.message.content, item.message.content) if part
            )
            message = item.message.model_copy(
                update={
                    "content": text,
                    "tool_calls": calls,
                    "metadata": {
                        **item.message.metadata,
                        "self_check": {"draft": filing.arguments, "revised": revised},
                    },
                }
            )
            yield StreamEnd(response=item.model_copy(update={"message": message}))

    def _filing(self, calls: list[ToolCall]) -> ToolCall | None:
        return next((c for c in calls if c.name == self.report_tool), None)

    def _check_prompt(self, filing: ToolCall) -> str:
        arguments = json.dumps(filing.arguments, indent=2, ensure_ascii=False)
        return self.instruction.format(tool=self.report_tool, arguments=arguments)


PLAN_INSTRUCTION = """\
Before calling any tool, write a short plan: at most three numbered steps saying which \
tools you will call, in which order, and what you will look for. Do not call a tool in \
this reply."""

ACT_INSTRUCTION = "Now carry out your plan: call the first tool."


class PlanThenInvestigate:
    """Plans first, then acts, on the first step of each run.

    On a step whose request ends with the user's own message (the start of a run), a first
    call adds a planning instruction and asks for a short plan without tool calls. A
    second call then sees the plan as an assistant message and an instruction to act. The
    step's answer is the second call's response with the plan's text in front, so the
    history keeps the plan and stays a valid user -> assistant (tool calls) -> tool
    sequence. If the model calls tools in the planning call anyway, that response is the
    answer and no second call is made. Later steps run as in `DirectStrategy`.
    """

    name = "plan"

    def __init__(
        self,
        plan_instruction: str = PLAN_INSTRUCTION,
        act_instruction: str = ACT_INSTRUCTION,
    ) -> None:
        self.plan_instruction = plan_instruction
        self.act_instruction = act_instruction

    async def respond(
        self,
        provider: Provider,
        request: ModelRequest,
        cancel: CancelToken | None = None,
    ) -> AsyncIterator[StreamEvent]:
        if not _starts_run(request.messages):
            async for event in stream_call(provider, request):
                yield event
            return

        plan_request = request.model_copy(
            update={
                "messages": [
                    *request.messages,
                    Message.user(self.plan_instruction, plan=True),
                ]
            }
        )
        plan: ModelResponse | None = None
        async for event in stream_call(provider, plan_request):
            if isinstance(event, StreamEnd):
                plan = event.response
            yield event
        assert plan is not None
        if plan.message.tool_calls or (cancel is not None and cancel.is_set):
            return

        act_request = request.model_copy(
            update={
                "messages": [
                    *plan_request.messages,
                    Message.assistant(plan.message.content or "(no plan)"),
                    Message.user(self.act_instruction, plan=True),
                ]
            }
        )
        async for item in _collect(provider, act_request):
            if not isinstance(item, ModelResponse):
                yield item
                continue
            text = "\n\n".join(
                part for part in (plan.message.content, item.message.content) if part
            )
            message = item.message.model_copy(
                update={
                    "content": text,
                    "metadata": {**item.message.metadata, "plan": plan.message.content},
                }
            )
            yield StreamEnd(response=item.model_copy(update={"message": message}))


def _starts_run(messages: list[Message]) -> bool:
    if not messages:
        return False
    last = messages[-1]
    return last.role == "user" and not last.metadata.get("nudge")


STRATEGIES: dict[str, Callable[..., ReasoningStrategy]] = {
    "direct": DirectStrategy,
    "self_check": SelfCheckStrategy,
    "plan": PlanThenInvestigate,
}


def get_strategy(name: str, **options: Any) -> ReasoningStrategy:
    """The strategy registered under `name` ("direct", "self_check", "plan")."""
    key = name.strip().lower().replace("-", "_")
    aliases = {"plan_then_investigate": "plan", "selfcheck": "self_check"}
    key = aliases.get(key, key)
    try:
        factory = STRATEGIES[key]
    except KeyError:
        known = ", ".join(sorted(STRATEGIES))
        raise ConfigurationError(f"Unknown reasoning strategy {name!r} (known: {known})") from None
    return factory(**options)
