"""Small in-process doubles of the agent's components, for tests and benchmarks.

- `ScriptedProvider` plays back scripted model turns (text, tool calls, errors) through
  the real `Provider` interface, streaming included.
- `FakeTools` is a `ToolExecutor` over plain functions.
- `PassThroughContext` is a `ContextManager` that never trims.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from agent.context.protocol import ContextFit
from agent.context.tokens import estimate_tokens
from agent.messages import Message, ToolCall, ToolDefinition, ToolResult, Usage
from agent.providers.protocol import (
    ModelRequest,
    ModelResponse,
    ProviderCapabilities,
    StreamEnd,
    StreamEvent,
    StreamTextDelta,
    StreamToolCallDelta,
)

_ids = itertools.count(1)


def call(name: str, call_id: str | None = None, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id or f"call_{next(_ids)}", name=name, arguments=arguments)


def reply(
    text: str = "",
    *calls: ToolCall,
    input_tokens: int = 100,
    output_tokens: int = 20,
    model: str | None = None,
) -> ModelResponse:
    """A scripted model turn: some text and/or tool calls."""
    return ModelResponse(
        message=Message.assistant(text, list(calls)),
        usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
        finish_reason="tool_calls" if calls else "stop",
        model=model,
    )


# A turn is a finished response, an error to raise instead, or raw stream events
# (to script retries, cut-off streams...).
Turn = ModelResponse | BaseException | Sequence[StreamEvent | BaseException]


class ScriptedProvider:
    """Plays back `turns`, one per model call, and records each request it received.

    A ModelResponse streams as text deltas of `chunk` characters, then one tool-call
    delta per call, then its StreamEnd. `gate`, when given, is awaited before each
    event: tests use it to hold a stream open.
    """

    def __init__(
        self,
        turns: Sequence[Turn],
        *,
        name: str = "scripted",
        model: str = "scripted-model",
        chunk: int = 8,
        context_window: int = 32_000,
        gate: asyncio.Event | None = None,
    ) -> None:
        self._turns = list(turns)
        self._name = name
        self._model = model
        self.chunk = chunk
        self.context_window = context_window
        self.gate = gate
        self.requests: list[ModelRequest] = []
        self.closed_streams = 0
        self.aclosed = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return self._model

    @property
    def remaining(self) -> int:
        return len(self._turns)

    def _next_turn(self, request: ModelRequest) -> Turn:
        self.requests.append(request)
        if not self._turns:
            raise AssertionError("ScriptedProvider: no scripted turn left")
        return self._turns.pop(0)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        turn = self._next_turn(request)
        if isinstance(turn, BaseException):
            raise turn
        if isinstance(turn, ModelResponse):
            return turn
        for event in turn:
            if isinstance(event, BaseException):
                raise event
            if isinstance(event, StreamEnd):
                return event.response
        raise AssertionError("scripted events without a StreamEnd")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        turn = self._next_turn(request)
        try:
            for event in self._events(turn):
                if self.gate is not None:
                    await self.gate.wait()
                if isinstance(event, BaseException):
                    raise event
                yield event
        finally:
            self.closed_streams += 1

    def _events(self, turn: Turn) -> list[StreamEvent | BaseException]:
        if isinstance(turn, BaseException):
            return [turn]
        if not isinstance(turn, ModelResponse):
            return list(turn)
        text = turn.message.content
        events: list[StreamEvent | BaseException] = [
            StreamTextDelta(text=text[i : i + self.chunk]) for i in range(0, len(text), self.chunk)
        ]
        for index, tool_call in enumerate(turn.message.tool_calls):
            events.append(
                StreamToolCallDelta(
                    index=index,
                    id=tool_call.id,
                    name=tool_call.name,
                    arguments_fragment=json.dumps(tool_call.arguments),
                )
            )
        events.append(StreamEnd(response=turn))
        return events

    def estimate_tokens(self, messages: Sequence[Message], system: str = "") -> int:
        return estimate_tokens(messages, system)

    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities(context_window=self.context_window)

    async def aclose(self) -> None:
        self.aclosed = True


Handler = Callable[..., Any]


class FakeTools:
    """A ToolExecutor over plain functions, sync or async.

    A handler returns a ToolResult (used as is), a dict (JSON content, success) or
    anything else (its str). An exception becomes a failed result, as in the registry.
    `terminal` names the tools whose success ends the run (the report filing).
    """

    def __init__(self, handlers: dict[str, Handler], *, terminal: Sequence[str] = ()) -> None:
        self.handlers = handlers
        self.terminal = set(terminal)
        self.calls: list[ToolCall] = []

    def get_tools(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(
                name=name,
                description=(handler.__doc__ or name).strip(),
                parameters={"type": "object", "properties": {}},
            )
            for name, handler in self.handlers.items()
        ]

    def format_for_provider(self, provider: str) -> list[dict[str, Any]]:
        return [tool.model_dump() for tool in self.get_tools()]

    async def execute(self, call: ToolCall) -> ToolResult:
        self.calls.append(call)
        handler = self.handlers.get(call.name)
        if handler is None:
            return ToolResult(
                tool_call_id=call.id,
                name=call.name,
                content=f"Unknown tool {call.name!r}",
                success=False,
                error_type="ToolNotFoundError",
            )
        try:
            value = handler(**call.arguments)
            if asyncio.iscoroutine(value):
                value = await value
        except Exception as exc:
            return ToolResult(
                tool_call_id=call.id,
                name=call.name,
                content=f"{call.name} failed: {exc}",
                success=False,
                error_type="ToolExecutionError",
            )
        if isinstance(value, ToolResult):
            return value.model_copy(update={"tool_call_id": call.id, "name": call.name})
        data = value if isinstance(value, dict) else None
        content = json.dumps(value) if data is not None else str(value)
        return ToolResult(
            tool_call_id=call.id,
            name=call.name,
            content=content,
            success=True,
            data=data,
            terminal=call.name in self.terminal,
        )


class PassThroughContext:
    """A ContextManager that keeps everything, and remembers what it was told."""

    def __init__(self, context_window: int = 32_000) -> None:
        self.context_window = context_window
        self.recorded: list[tuple[int, int]] = []
        self.resets = 0

    async def fit(self, system_prompt: str, messages: Sequence[Message]) -> ContextFit:
        tokens = estimate_tokens(messages, system_prompt)
        return ContextFit(
            messages=list(messages),
            tokens=tokens,
            budget=self.context_window,
            context_window=self.context_window,
            strategy="none",
            messages_before=len(messages),
            tokens_before=tokens,
        )

    def record_usage(self, prompt_tokens: int, messages_sent: int) -> None:
        self.recorded.append((prompt_tokens, messages_sent))

    def reset(self) -> None:
        self.resets += 1
