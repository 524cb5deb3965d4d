"""The agent: one conversation, driven message by message.

One class, whose steps share the run's state they advance. Beside it: what a run may do
(`agent.run_config`), the run's bookkeeping and the rules read from it (`agent.run_state`),
and the model's answer as a stream whatever the provider (`agent.model_stream`).

`Agent.send_message(content)` is an async generator of `AgentEvent`s. Each step of a run:

1. fit the history to the context window (`ContextTrimmed` when something had to go);
2. ask the reasoning strategy for a response, relaying what streams in (`TextDelta`,
   `RetryScheduled`), then `ModelResponded` and `UsageReported` for each model call;
3. append the assistant message, then run its tool calls in order, appending each
   result right after it (providers require the results to follow the assistant message
   that asked for them, in the same order);
4. stop when the report is filed (`RunFinished(reason="report_filed")`), when the model
   answers without a tool call (`"answered"`), when it makes the same failing tool call
   `max_repeated_tool_failures` times in a row (the second time, its result adds the exact
   problem and a call that passes: `agent.repetition`) or a tool fails with `terminal=True`, saying
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
per run (see `agent.run_state.needs_nudge` for when a reply counts as such).

Every message and event is saved through the store before the event is yielded. Expected
failures end the run with `RunFailed` rather than an exception, and a `CancelToken` ends
it with `RunCancelled`; the history stays valid for the next run either way (a tool call
that never ran gets a "not run" result, so no call is left without its result).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing

from pydantic import BaseModel, ConfigDict, Field

from agent.cancel import CancelToken, cancellable, unless_cancelled
from agent.context.protocol import ContextFit, ContextManager
from agent.errors import AgentError, RunCancelledError, RunLimitExceeded, StreamError
from agent.events import (
    AgentEvent,
    ContextTrimmed,
    ModelRequestStarted,
    ModelResponded,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallRequested,
    ToolResultReceived,
    UsageReported,
)
from agent.messages import Conversation, Message, ToolCall, Usage
from agent.model_stream import CompleteAsStream, as_generator, retry_event
from agent.pricing import estimate_cost
from agent.providers.protocol import (
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderCapabilities,
    StreamEnd,
    StreamRetry,
    StreamTextDelta,
    StreamToolCallDelta,
)
from agent.reasoning import DirectStrategy, ReasoningStrategy
from agent.repetition import repeated_hint
from agent.run_config import DEFAULT_CONFIG, AgentConfig
from agent.run_state import (
    RunState,
    check_caps,
    count_repeated_failure,
    cut_off,
    needs_nudge,
    not_run,
    output_size,
    report_event,
    unanswered_calls,
    usage_total,
)
from agent.store import ConversationStore
from agent.telemetry.logging import scrub
from agent.tools.protocol import ToolExecutor

logger = logging.getLogger(__name__)

CUT_OFF_RESULT = (
    "Not run: the answer was cut off at the output limit, so this call's arguments are incomplete."
)
# AgentConfig lives in agent.run_config; `from agent.loop import AgentConfig` still works.
__all__ = ["Agent", "AgentConfig", "ConversationContext"]


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
            usage=usage_total(conversation),
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
        run = RunState()
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
                    names = {tool.name for tool in self.tools.get_tools()}
                    if needs_nudge(run, self.config, last, names, conversation.messages):
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
        self, run: RunState, cancel: CancelToken | None
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
            events = as_generator(events)
        async with aclosing(cancellable(events, cancel)) as stream:
            async for event in stream:
                if isinstance(event, StreamTextDelta):
                    run.partial_text += event.text
                    run.text_chars += len(event.text)
                    run.output_chars += len(event.text)
                    check_caps(run, self.config)
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
                    check_caps(run, self.config)
                elif isinstance(event, StreamRetry):
                    if event.partial_discarded:
                        run.partial_text = ""
                    yield self._save(retry_event(event))
                elif isinstance(event, StreamEnd):
                    response = event.response
                    if not self.config.stream:  # nothing streamed: count the answer whole
                        run.output_chars += output_size(response)
                        check_caps(run, self.config)
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
        run.cut_off = cut_off(response)
        if run.cut_off:
            # Not run: a call cut off mid-arguments would only fail, the same way each time.
            run.cut_offs += 1
            self._skip(message.tool_calls, CUT_OFF_RESULT)
            return
        async with aclosing(self._run_tools(run, message.tool_calls, cancel)) as tools:
            async for event in tools:
                yield event

    async def _open(
        self, run: RunState, cancel: CancelToken | None
    ) -> AsyncGenerator[AgentEvent, None]:
        calls = list(self.config.opening_calls)
        # Marked, so that a transcript can tell these calls from the model's own.
        self._append(Message.assistant("", tool_calls=calls, opening=True))
        async with aclosing(self._run_tools(run, calls, cancel)) as tools:
            async for event in tools:
                yield event

    def _is_new(self) -> bool:
        return not any(message.role == "assistant" for message in self.conversation.messages)

    def _account(
        self, run: RunState, response: ModelResponse, duration_ms: float
    ) -> list[AgentEvent]:
        usage = response.usage
        run.usage = run.usage + usage
        metadata = self.conversation.metadata
        total = usage_total(self.conversation) + usage
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
        self, run: RunState, calls: Sequence[ToolCall], cancel: CancelToken | None
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
            # A cancel lands inside a tool call too (the call then gets "not run" on resume).
            result = await unless_cancelled(self.tools.execute(call), cancel)
            run.last_tool_failed = not result.success
            count_repeated_failure(run, self.config, call, result)
            if run.failure_repeats == 2 and not result.terminal:
                # Told the same words twice, a small model files the same call a third time.
                definition = next((t for t in self.tools.get_tools() if t.name == call.name), None)
                hint = repeated_hint(definition, call, result.content)
                result = result.model_copy(update={"content": result.content + hint})
            self._append(Message.tool(result))
            yield self._save(ToolResultReceived(step=run.steps, result=result))
            if result.terminal and result.success:
                run.report_filed = True
                yield self._save(report_event(call, result))
            elif result.terminal:
                run.ended_by_tool = True
                run.final_text = f"Stopped: {result.content}"

    def _skip(self, calls: Sequence[ToolCall], reason: str) -> None:
        """Give each call that will not run a result, so that the history stays valid."""
        for message in not_run(calls, reason):
            self._append(message)

    def _complete_tool_results(self) -> None:
        """Give a "not run" result to any call of the last assistant message left without
        one (the run's task was cancelled mid-tool), so the next request stays valid."""
        self._skip(
            unanswered_calls(self.conversation.messages), "Not run: the run was interrupted."
        )

    # -- helpers ------------------------------------------------------------------

    def _flush_text(self, run: RunState) -> AgentEvent:
        text, run.pending_text = run.pending_text, ""
        run.flushed_at = time.monotonic()
        return self._save(TextDelta(step=run.steps, text=text))

    def _finish(self, run: RunState, reason: str) -> AgentEvent:
        return self._save(
            RunFinished(
                reason=reason,  # type: ignore[arg-type]
                final_text=run.final_text,
                steps=run.steps,
                usage=run.usage,
            )
        )

    def _model(self) -> Provider:
        return self.provider if self.config.stream else CompleteAsStream(self.provider)

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
        if not isinstance(event, _TERMINAL_EVENTS):
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


# A tuple, not `A | B | C`: that builds a union object on every call (every event here).
_TERMINAL_EVENTS = (RunFinished, RunFailed, RunCancelled)


def _check(cancel: CancelToken | None) -> None:
    if cancel is not None and cancel.is_set:
        raise RunCancelledError(cancel.reason)
