"""The agent: one conversation, driven message by message.

Over 600 lines on purpose: one class, whose steps share the run's state they advance.

`Agent.send_message(content)` is an async generator of `AgentEvent`s. Each step of a run:

1. fit the history to the context window (`ContextTrimmed` when something had to go);
2. ask the reasoning strategy for a response, relaying what streams in (`TextDelta`,
   `RetryScheduled`), then `ModelResponded` and `UsageReported` for each model call;
3. append the assistant message, then run its tool calls in order, appending each
   result right after it (providers require the results to follow the assistant message
   that asked for them, in the same order);
4. stop when the report is filed (`RunFinished(reason="report_filed")`), when the model
   answers without a tool call (`"answered"`), when it makes the same failing tool call
   `max_repeated_tool_failures` times in a row or a tool fails with `terminal=True`, saying
   nothing more can be done (`"tool_failing"`), or after `max_steps` (`"max_steps"`);
   everything done so far stays in the history. An answer cut off at the output limit
   (finish reason "length") with no usable tool call is asked for once more, briefly
   (`output_limit_message`); cut off again, the run ends (`"output_limit"`).

Tool calls the caller knows the model would make first (`AgentConfig.opening_calls`: the
release summary, for a small model) are run before the first step, as an assistant message of
their own marked `opening`, with their events at step 0: the model starts from their results
and does not spend a model call writing them out (3.3 s of a 1.5B model's 12 s on 2 cores).

A reply with text only, in the middle of an investigation, does not end the run at once:
small models often announce a tool call ("I will now fetch the summary") instead of
making it, or write their assessment instead of filing it. The loop then adds one short
user message asking the model to call the tools, at most `max_text_only_nudges` times
per run (see `Agent._needs_nudge` for when a reply counts as such).

Every message and event is saved through the store before the event is yielded. Expected
failures end the run with `RunFailed` rather than an exception, and a `CancelToken` ends
it with `RunCancelled`; the history stays valid for the next run either way (a tool call
that never ran gets a "not run" result, so no call is left without its result).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.cancel import CancelToken, cancellable
from agent.context.protocol import ContextFit, ContextManager
from agent.errors import (
    AgentError,
    ProviderError,
    RunCancelledError,
    RunLimitExceeded,
    StreamError,
)
from agent.events import (
    AgentEvent,
    ContextTrimmed,
    ModelRequestStarted,
    ModelResponded,
    ReportFiled,
    RetryScheduled,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallRequested,
    ToolResultReceived,
    UsageReported,
)
from agent.messages import Conversation, Message, ToolCall, ToolResult, Usage
from agent.pricing import estimate_cost
from agent.prompts import DEFAULT_SYSTEM_PROMPT
from agent.providers.protocol import (
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderCapabilities,
    StreamEnd,
    StreamEvent,
    StreamRetry,
    StreamTextDelta,
    StreamToolCallDelta,
)
from agent.providers.wire import RAW_ARGUMENTS_KEY
from agent.reasoning import REPORT_TOOL, DirectStrategy, ReasoningStrategy
from agent.retry import listening_for_retries
from agent.store import ConversationStore
from agent.telemetry.logging import scrub
from agent.tools.protocol import ToolExecutor

logger = logging.getLogger(__name__)

# Said once when the model's answer was cut off at the output limit (finish reason "length"):
# the same request would be cut off the same way, at temperature 0 every time.
OUTPUT_LIMIT_MESSAGE = (
    "Your answer was cut off at the output limit ({max_tokens} tokens), so nothing was done. "
    "Write no text at all: call {report_tool} now, with short findings and no summary."
)
CUT_OFF_RESULT = (
    "Not run: the answer was cut off at the output limit, so this call's arguments are incomplete."
)

NUDGE_MESSAGE = (
    "You replied without calling a tool. Do not describe what you are going to do: "
    "call the tool you need now. Once you have the release summary, file the report "
    "with {report_tool}."
)

# A reply that announces its next action instead of taking it.
_ANNOUNCES_ACTION = re.compile(
    r"\b(i will|i'll|i am going to|i'm going to|let me|let's|i need to|i shall|"
    r"next,? i|now i)\b",
    re.IGNORECASE,
)


class AgentConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_steps: int = Field(default=8, ge=1)
    temperature: float | None = None
    max_tokens: int = Field(default=1024, ge=1)
    # False: one `complete()` call per model call, no deltas (for servers that cannot
    # stream tool calls).
    stream: bool = True
    # Filing the report ends the run; small models otherwise file again and again.
    end_on_report: bool = True
    max_text_only_nudges: int = Field(default=1, ge=0)
    # The same tool call (same arguments) failing the same way this many times in a row ends
    # the run: small models otherwise repeat it until the step limit (seen: filing for a
    # missing release seven times over).
    max_repeated_tool_failures: int = Field(default=3, ge=1)
    nudge_message: str = NUDGE_MESSAGE
    report_tool: str = REPORT_TOOL
    # An answer cut off at the output limit is asked for again this many times, with
    # `output_limit_message`; one more cut ends the run ("output_limit").
    max_output_limit_retries: int = Field(default=1, ge=0)
    output_limit_message: str = OUTPUT_LIMIT_MESSAGE
    # Streamed text is saved as TextDelta events of up to `delta_flush_chars` characters, at
    # most every `delta_flush_seconds`: not one event per chunk (a model streaming 10 MB in
    # 200-byte chunks made 50,000 events).
    delta_flush_chars: int = Field(default=2_000, ge=1)
    delta_flush_seconds: float = Field(default=0.25, ge=0)
    # Caps of one run, far above what an assessment uses (about 60 events and a few thousand
    # characters): past one, the run is stopped and fails saying which cap.
    max_events: int = Field(default=2_000, ge=10)
    max_text_chars: int = Field(default=200_000, ge=1)
    max_output_chars: int = Field(default=500_000, ge=1)
    # Run before the model's first step of a new conversation (see the module's docstring).
    opening_calls: tuple[ToolCall, ...] = ()


DEFAULT_CONFIG = AgentConfig()


class ConversationContext(BaseModel):
    """What `Agent.get_context()` reports about the current conversation."""

    model_config = ConfigDict(frozen=True)

    conversation_id: str
    message_count: int
    estimated_tokens: int
    context_window: int
    utilisation: float
    provider: str
    model: str
    reasoning: str
    trace_id: str | None = None
    tool_calls: dict[str, int] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    estimated_cost_usd: float | None = None


class _Run:
    """The bookkeeping of one `send_message` call."""

    def __init__(self) -> None:
        self.steps = 0
        self.usage = Usage()
        self.nudges = 0
        self.tool_calls = 0
        self.last_tool_failed = False
        # The last failing call (tool, arguments, error) and how often in a row it failed.
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


class Agent:
    def __init__(
        self,
        provider: Provider,
        tools: ToolExecutor,
        *,
        context: ContextManager,
        reasoning: ReasoningStrategy | None = None,
        store: ConversationStore | None = None,
        config: AgentConfig = DEFAULT_CONFIG,
        conversation: Conversation | None = None,
    ) -> None:
        self.provider = provider
        self.tools = tools
        self.context = context
        self.reasoning: ReasoningStrategy = reasoning or DirectStrategy()
        self.store = store
        self.config = config
        self.conversation = conversation or self._fresh_conversation()
        self._last_fit: ContextFit | None = None
        self._events_saved = 0  # in the current send_message, its end left out
        self._closers: list[Callable[[], Awaitable[object]]] = []

    # -- conversations ------------------------------------------------------------

    def new_conversation(self) -> Conversation:
        """Start afresh: same provider, tools, strategy and configuration."""
        self.conversation = self._fresh_conversation()
        self._forget_context_cache()
        return self.conversation

    def resume(self, conversation: Conversation | str) -> Conversation:
        """Continue a saved conversation, given itself or its id in the store."""
        if isinstance(conversation, str):
            if self.store is None:
                raise AgentError("No store to load the conversation from")
            conversation = self.store.load(conversation)
        self.conversation = conversation
        self._forget_context_cache()
        return conversation

    def get_history(self, limit: int | None = None) -> list[Message]:
        messages = list(self.conversation.messages)
        if limit is not None:
            return messages[-limit:] if limit > 0 else []
        return messages

    def get_context(self) -> ConversationContext:
        conversation = self.conversation
        system = conversation.system_prompt
        tokens = self.provider.estimate_tokens(conversation.messages, system)
        if self._last_fit is not None:
            window = self._last_fit.context_window
        else:
            window = self._capabilities().context_window
        counts: dict[str, int] = {}
        for message in conversation.messages:
            for call in message.tool_calls:
                counts[call.name] = counts.get(call.name, 0) + 1
        return ConversationContext(
            conversation_id=conversation.id,
            message_count=len(conversation.messages),
            estimated_tokens=tokens,
            context_window=window,
            utilisation=tokens / window if window else 0.0,
            provider=self.provider.name,
            model=self.provider.model,
            reasoning=self.reasoning.name,
            trace_id=conversation.trace_id,
            tool_calls=counts,
            usage=_usage_total(conversation),
            estimated_cost_usd=conversation.metadata.get("estimated_cost_usd"),
        )

    def close_with(self, closer: Callable[[], Awaitable[object]]) -> None:
        """Have `aclose()` also release this (the release tools' HTTP client...)."""
        self._closers.append(closer)

    async def aclose(self) -> None:
        """Release the provider's connections and whatever `close_with` registered."""
        await self.provider.aclose()
        for closer in self._closers:
            await closer()

    # -- the run ----------------------------------------------------------------

    async def send_message(
        self, content: str, cancel: CancelToken | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the agent on one user message, yielding its events as they happen.

        The generator always ends with exactly one of RunFinished, RunFailed or
        RunCancelled; expected failures do not raise out of it.
        """
        run = _Run()
        self._events_saved = 0
        conversation = self.conversation
        try:
            self._persist_conversation()
            yield self._save(
                RunStarted(
                    conversation_id=conversation.id,
                    provider=self.provider.name,
                    model=self.provider.model,
                    trace_id=conversation.trace_id,
                    reasoning=self.reasoning.name,
                )
            )
            opening = self._is_new() and bool(self.config.opening_calls)
            self._append(Message.user(content))
            if opening:
                async with aclosing(self._open(run, cancel)) as opening_events:
                    async for event in opening_events:
                        yield event
                if run.ended_by_tool:
                    yield self._finish(run, "tool_failing")
                    return
            while run.steps < self.config.max_steps:
                _check(cancel)
                run.steps += 1
                async with aclosing(self._step(run, cancel)) as step_events:
                    async for event in step_events:
                        yield event
                if run.report_filed and self.config.end_on_report:
                    yield self._finish(run, "report_filed")
                    return
                if run.cut_off:
                    if run.cut_offs > self.config.max_output_limit_retries:
                        run.final_text = (
                            "Stopped: the model's answer was cut off at the output limit "
                            f"({self.config.max_tokens} tokens) again, so nothing was filed."
                        )
                        yield self._finish(run, "output_limit")
                        return
                    message = self.config.output_limit_message.format(
                        max_tokens=self.config.max_tokens, report_tool=self.config.report_tool
                    )
                    self._append(Message.user(message, nudge=True))
                    continue
                if (
                    run.ended_by_tool
                    or run.failure_repeats >= self.config.max_repeated_tool_failures
                ):
                    yield self._finish(run, "tool_failing")
                    return
                last = conversation.messages[-1]
                if last.role == "assistant" and not last.tool_calls:
                    if self._needs_nudge(run, last):
                        run.nudges += 1
                        nudge = self.config.nudge_message.format(
                            report_tool=self.config.report_tool
                        )
                        self._append(Message.user(nudge, nudge=True))
                        continue
                    yield self._finish(run, "answered")
                    return
            yield self._finish(run, "max_steps")
        except RunCancelledError as exc:
            if run.partial_text:
                # What was shown to the user stays, marked as cut short.
                self._append(Message.assistant(run.partial_text, partial=True, cancelled=True))
            yield self._save(RunCancelled(reason=str(exc) or "cancelled", steps=run.steps))
        except AgentError as exc:
            logger.warning(
                "run failed: %s: %s",
                type(exc).__name__,
                exc,
                extra={"conversation_id": conversation.id},
            )
            # Adapters keep keys out of their messages; scrubbing the registered secrets
            # is the safety net, since this message is saved and shown.
            yield self._save(
                RunFailed(error_type=type(exc).__name__, message=scrub(str(exc)), steps=run.steps)
            )
        except Exception as exc:
            # A bug, not an expected failure: logged with its traceback, reported
            # without details that could carry data from anywhere.
            logger.exception("run crashed", extra={"conversation_id": conversation.id})
            yield self._save(
                RunFailed(
                    error_type=type(exc).__name__,
                    message="Unexpected internal error; see the logs for details",
                    steps=run.steps,
                )
            )
        finally:
            self._complete_tool_results()
            self._save_metadata()

    async def _step(
        self, run: _Run, cancel: CancelToken | None
    ) -> AsyncGenerator[AgentEvent, None]:
        conversation = self.conversation
        fit = await self.context.fit(conversation.system_prompt, conversation.messages)
        self._last_fit = fit
        if fit.trimmed:
            yield self._save(
                ContextTrimmed(
                    strategy=fit.strategy,
                    messages_before=fit.messages_before,
                    messages_after=len(fit.messages),
                    tokens_before=fit.tokens_before,
                    tokens_after=fit.tokens,
                    budget=fit.budget,
                    utilisation=fit.utilisation,
                )
            )
        yield self._save(
            ModelRequestStarted(
                step=run.steps,
                message_count=len(fit.messages),
                estimated_input_tokens=fit.tokens,
                context_window=fit.context_window,
            )
        )
        request = ModelRequest(
            system=conversation.system_prompt,
            messages=fit.messages,
            tools=self.tools.get_tools(),
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
        )

        response: ModelResponse | None = None
        calls = 0
        started = time.monotonic()
        events = self.reasoning.respond(self._model(), request, cancel)
        if not isinstance(events, AsyncGenerator):
            events = _as_generator(events)
        async with aclosing(cancellable(events, cancel)) as stream:
            async for event in stream:
                if isinstance(event, StreamTextDelta):
                    run.partial_text += event.text
                    run.text_chars += len(event.text)
                    run.output_chars += len(event.text)
                    self._check_caps(run)
                    run.pending_text += event.text
                    if (
                        len(run.pending_text) >= self.config.delta_flush_chars
                        or time.monotonic() - run.flushed_at >= self.config.delta_flush_seconds
                    ):
                        yield self._flush_text(run)
                    continue
                if run.pending_text:
                    yield self._flush_text(run)
                if isinstance(event, StreamToolCallDelta):
                    run.output_chars += len(event.arguments_fragment)
                    self._check_caps(run)
                elif isinstance(event, StreamRetry):
                    if event.partial_discarded:
                        run.partial_text = ""
                    yield self._save(_retry_event(event))
                elif isinstance(event, StreamEnd):
                    response = event.response
                    if not self.config.stream:  # nothing streamed: count the answer whole
                        run.output_chars += _output_size(response)
                        self._check_caps(run)
                    calls += 1
                    run.partial_text = ""
                    if calls == 1 and response.usage.input_tokens > 0:
                        # The first call's prompt is the fitted history: its exact size.
                        self.context.record_usage(response.usage.input_tokens, len(fit.messages))
                    duration_ms = (time.monotonic() - started) * 1000
                    started = time.monotonic()
                    for usage_event in self._account(run, response, duration_ms):
                        yield self._save(usage_event)
        if run.pending_text:
            yield self._flush_text(run)
        if response is None:
            raise StreamError("The model returned no response")

        message = response.message.model_copy(
            update={
                "metadata": {
                    **response.message.metadata,
                    "step": run.steps,
                    "model": response.model or self.provider.model,
                    "finish_reason": response.finish_reason,
                    "usage": response.usage.model_dump(mode="json"),
                }
            }
        )
        self._append(message)
        run.final_text = message.content or run.final_text
        run.cut_off = _cut_off(response)
        if run.cut_off:
            # Not run: a call cut off mid-arguments would only fail, the same way each time.
            run.cut_offs += 1
            self._skip(message.tool_calls, CUT_OFF_RESULT)
            return
        async with aclosing(self._run_tools(run, message.tool_calls, cancel)) as tools:
            async for event in tools:
                yield event

    async def _open(
        self, run: _Run, cancel: CancelToken | None
    ) -> AsyncGenerator[AgentEvent, None]:
        calls = list(self.config.opening_calls)
        # Marked, so that a transcript can tell these calls from the model's own.
        self._append(Message.assistant("", tool_calls=calls, opening=True))
        async with aclosing(self._run_tools(run, calls, cancel)) as tools:
            async for event in tools:
                yield event

    def _is_new(self) -> bool:
        return not any(message.role == "assistant" for message in self.conversation.messages)

    def _account(self, run: _Run, response: ModelResponse, duration_ms: float) -> list[AgentEvent]:
        usage = response.usage
        run.usage = run.usage + usage
        metadata = self.conversation.metadata
        total = _usage_total(self.conversation) + usage
        metadata["usage"] = total.model_dump(mode="json")
        cost = estimate_cost(response.model or self.provider.model, usage, self.provider.name)
        if cost is not None:
            metadata["estimated_cost_usd"] = (metadata.get("estimated_cost_usd") or 0.0) + cost
        return [
            ModelResponded(
                step=run.steps,
                text=response.message.content,
                tool_call_count=len(response.message.tool_calls),
                finish_reason=response.finish_reason,
                response_model=response.model,
                duration_ms=duration_ms,
            ),
            UsageReported(step=run.steps, usage=usage, total=total, estimated_cost_usd=cost),
        ]

    async def _run_tools(
        self, run: _Run, calls: Sequence[ToolCall], cancel: CancelToken | None
    ) -> AsyncGenerator[AgentEvent, None]:
        for index, call in enumerate(calls):
            if run.report_filed and self.config.end_on_report:
                self._skip(calls[index:], "Not run: the report was filed, which ends the run.")
                return
            if run.ended_by_tool:
                self._skip(calls[index:], "Not run: the run ended on the previous tool's failure.")
                return
            if cancel is not None and cancel.is_set:
                self._skip(calls[index:], "Not run: the run was cancelled.")
                raise RunCancelledError(cancel.reason)
            run.tool_calls += 1
            yield self._save(ToolCallRequested(step=run.steps, tool_call=call))
            result = await self.tools.execute(call)
            self._append(Message.tool(result))
            run.last_tool_failed = not result.success
            self._count_repeated_failure(run, call, result)
            yield self._save(ToolResultReceived(step=run.steps, result=result))
            if result.terminal and result.success:
                run.report_filed = True
                yield self._save(_report_event(call, result))
            elif result.terminal:
                run.ended_by_tool = True
                run.final_text = f"Stopped: {result.content}"

    def _count_repeated_failure(self, run: _Run, call: ToolCall, result: ToolResult) -> None:
        if result.success:
            run.last_failure, run.failure_repeats = None, 0
            return
        failure = (call.name, json.dumps(call.arguments, sort_keys=True), result.content)
        run.failure_repeats = run.failure_repeats + 1 if failure == run.last_failure else 1
        run.last_failure = failure
        if run.failure_repeats >= self.config.max_repeated_tool_failures:
            # The run's answer says plainly why it stopped, in the tool's own words.
            # No count in it: a figure in the answer must come from the release data.
            run.final_text = (
                f"Stopped: {call.name} kept failing with the same error, so the run ends "
                f"here. {result.content}"
            )

    def _skip(self, calls: Sequence[ToolCall], reason: str) -> None:
        """Give each call that will not run a result, so that the history stays valid."""
        for call in calls:
            self._append(
                Message.tool(
                    ToolResult(
                        tool_call_id=call.id,
                        name=call.name,
                        content=reason,
                        success=False,
                        error_type="NotRun",
                    )
                )
            )

    def _complete_tool_results(self) -> None:
        """Give a "not run" result to any call of the last assistant message left without
        one (the run's task was cancelled mid-tool), so the next request stays valid."""
        messages = self.conversation.messages
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].role == "assistant":
                answered = {m.tool_call_id for m in messages[index + 1 :] if m.role == "tool"}
                missing = [c for c in messages[index].tool_calls if c.id not in answered]
                if missing:
                    self._skip(missing, "Not run: the run was interrupted.")
                return

    def _needs_nudge(self, run: _Run, reply: Message) -> bool:
        """Whether a text-only reply interrupted an investigation.

        It did when tools are on offer, nudges remain, no report was filed in this run,
        the last tool did not fail (a model reporting a missing release is right to stop
        there) and either the reply announces an action it did not take, or tools already
        ran in this run while the report, available, was never filed in this conversation
        (the model wrote its assessment instead of filing it).
        """
        if run.nudges >= self.config.max_text_only_nudges or run.report_filed:
            return False
        if run.last_tool_failed:
            return False
        names = {tool.name for tool in self.tools.get_tools()}
        if not names:
            return False
        if _ANNOUNCES_ACTION.search(reply.content):
            return True
        return (
            run.tool_calls > 0
            and self.config.report_tool in names
            and not self._report_filed_before()
        )

    def _report_filed_before(self) -> bool:
        return any(
            m.role == "tool" and m.name == self.config.report_tool and not m.is_error
            for m in self.conversation.messages
        )

    # -- helpers ------------------------------------------------------------------

    def _flush_text(self, run: _Run) -> AgentEvent:
        text, run.pending_text = run.pending_text, ""
        run.flushed_at = time.monotonic()
        return self._save(TextDelta(step=run.steps, text=text))

    def _check_caps(self, run: _Run) -> None:
        cfg = self.config
        if run.text_chars > cfg.max_text_chars:
            raise RunLimitExceeded(
                f"Stopped: the model streamed more than {cfg.max_text_chars:,} characters of "
                "text in this run (DETECTIVE_MAX_RUN_TEXT_CHARS)"
            )
        if run.output_chars > cfg.max_output_chars:
            raise RunLimitExceeded(
                f"Stopped: the model's output passed {cfg.max_output_chars:,} characters in "
                "this run (DETECTIVE_MAX_RUN_OUTPUT_CHARS)"
            )

    def _finish(self, run: _Run, reason: str) -> AgentEvent:
        return self._save(
            RunFinished(
                reason=reason,  # type: ignore[arg-type]
                final_text=run.final_text,
                steps=run.steps,
                usage=run.usage,
            )
        )

    def _model(self) -> Provider:
        return self.provider if self.config.stream else _CompleteAsStream(self.provider)

    def _capabilities(self) -> ProviderCapabilities:
        return self.provider.capabilities()

    def _fresh_conversation(self) -> Conversation:
        return Conversation(
            system_prompt=self.config.system_prompt,
            metadata={
                "provider": self.provider.name,
                "model": self.provider.model,
                "reasoning": self.reasoning.name,
            },
        )

    def _forget_context_cache(self) -> None:
        # The exact token count cached for the previous conversation says nothing
        # about this one.
        self._last_fit = None
        reset = getattr(self.context, "reset", None)
        if callable(reset):
            reset()

    def _append(self, message: Message) -> None:
        self.conversation.messages.append(message)
        if self.store is not None:
            self.store.append_message(self.conversation.id, message)

    def _save(self, event: AgentEvent) -> AgentEvent:
        if not isinstance(event, RunFinished | RunFailed | RunCancelled):
            self._events_saved += 1
            if self._events_saved > self.config.max_events:
                raise RunLimitExceeded(
                    f"Stopped: the run passed {self.config.max_events:,} events "
                    "(DETECTIVE_MAX_RUN_EVENTS)"
                )
        if self.store is not None:
            self.store.append_event(self.conversation.id, event)
        return event

    def _persist_conversation(self) -> None:
        if self.store is not None:
            self.store.create(self.conversation)
            self._save_metadata()

    def _save_metadata(self) -> None:
        if self.store is not None:
            try:
                self.store.update_metadata(self.conversation.id, **self.conversation.metadata)
            except AgentError:
                logger.warning("could not save the conversation's metadata")


def _cut_off(response: ModelResponse) -> bool:
    """Whether the answer stopped at the output limit with nothing usable: no tool call, or
    one whose arguments did not parse. A complete call before the limit still runs."""
    if response.finish_reason != "length":
        return False
    calls = response.message.tool_calls
    return not calls or any(RAW_ARGUMENTS_KEY in call.arguments for call in calls)


def _check(cancel: CancelToken | None) -> None:
    if cancel is not None and cancel.is_set:
        raise RunCancelledError(cancel.reason)


def _usage_total(conversation: Conversation) -> Usage:
    saved = conversation.metadata.get("usage")
    return Usage.model_validate(saved) if saved else Usage()


def _output_size(response: ModelResponse) -> int:
    message = response.message
    return len(message.content or "") + sum(
        len(json.dumps(call.arguments, default=str)) for call in message.tool_calls
    )


def _retry_event(event: StreamRetry) -> RetryScheduled:
    return RetryScheduled(
        attempt=event.attempt,
        max_attempts=event.max_attempts,
        delay_s=event.delay_s,
        reason=event.reason,
        error_type=event.error_type,
        partial_discarded=event.partial_discarded,
    )


def _report_event(call: ToolCall, result: ToolResult) -> ReportFiled:
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


async def _as_generator(
    events: AsyncIterator[StreamEvent],
) -> AsyncGenerator[StreamEvent, None]:
    """Any async iterator as an async generator, which `cancellable` can close."""
    aclose = getattr(events, "aclose", None)
    try:
        async for event in events:
            yield event
    finally:
        if aclose is not None:
            await aclose()


class _CompleteAsStream:
    """A provider whose `stream()` makes one `complete()` call: `AgentConfig.stream`
    off."""

    def __init__(self, inner: Provider) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        # Retries happen inside `complete`; with no stream to show them on as they happen,
        # they are reported once the call is over (succeeded or failed), before its end.
        retries: list[StreamRetry] = []
        try:
            with listening_for_retries(retries.append):
                response = await self._inner.complete(request)
        except ProviderError:
            for retry in retries:
                yield retry
            raise
        for retry in retries:
            yield retry
        yield StreamEnd(response=response)
