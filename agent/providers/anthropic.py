"""Anthropic Messages API (`POST /v1/messages`).

Wire format, after Anthropic's API reference:
- the system prompt is a top-level `system` field, not a message;
- an assistant turn is one message of `text` and `tool_use` blocks;
- tool results go back as `tool_result` blocks (with `is_error`) in ONE user message,
  in the order of the calls;
- streaming is SSE: `message_start`, `content_block_start` / `_delta` / `_stop`
  (`text_delta`, `input_json_delta`), `message_delta` (stop reason, output tokens),
  `message_stop`, `ping`, and `error` events.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent.context.tokens import estimate_tokens
from agent.errors import ProviderError, StreamError
from agent.messages import Message, ToolCall, ToolDefinition, Usage
from agent.providers.http import (
    HttpChannel,
    ModelDeadlines,
    decode_object,
    error_for_status,
    error_from_response,
    iter_sse,
)
from agent.providers.protocol import (
    ModelRequest,
    ModelResponse,
    ProviderCapabilities,
    StreamEnd,
    StreamEvent,
    StreamTextDelta,
    StreamToolCallDelta,
)
from agent.providers.wire import (
    model_limits,
    normalise_finish_reason,
    order_tool_results,
    parse_arguments,
    response_metadata,
)

PROVIDER = "anthropic"
DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MODEL = "claude-sonnet-4-5"
API_VERSION = "2023-06-01"
DEFAULT_TIMEOUT = 120.0
DEFAULT_LIMITS = (200_000, 8_192)

FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}

# The HTTP status each of the API's error types stands for, so that an `error` event in
# the middle of a 200 stream becomes the same class as the matching error response.
ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def to_wire_messages(messages: Sequence[Message]) -> tuple[list[str], list[dict[str, Any]]]:
    """Our messages as Anthropic `messages`, plus the text of any system messages
    (which the API only takes in the top-level `system` field)."""
    system: list[str] = []
    wire: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        # Consecutive turns of one role merge: the tool results of one assistant turn
        # must arrive as one user message, followed by any text the user added.
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})

    for message in order_tool_results(messages):
        if message.role == "system":
            if message.content:
                system.append(message.content)
        elif message.role == "user":
            add("user", _text_blocks(message.content))
        elif message.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
            }
            if message.is_error:
                block["is_error"] = True
            add("user", [block])
        else:
            blocks = _text_blocks(message.content)
            blocks += [
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": call.arguments,
                }
                for call in message.tool_calls
            ]
            add("assistant", blocks)
    return system, wire


def _text_blocks(text: str) -> list[dict[str, Any]]:
    # The API rejects empty text blocks.
    return [{"type": "text", "text": text}] if text else []


def to_wire_tool(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.parameters,
    }


def usage_from_wire(usage: dict[str, Any]) -> Usage:
    # Anthropic counts cached prompt tokens apart from `input_tokens`; ours is the whole
    # prompt, as other providers report it, so that context accounting sees its real size.
    cache_read = usage.get("cache_read_input_tokens") or 0
    cache_write = usage.get("cache_creation_input_tokens") or 0
    return Usage(
        input_tokens=(usage.get("input_tokens") or 0) + cache_read + cache_write,
        output_tokens=usage.get("output_tokens") or 0,
        cached_input_tokens=usage.get("cache_read_input_tokens"),
    )


class AnthropicProvider:
    """The Anthropic Messages API."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | ModelDeadlines = DEFAULT_TIMEOUT,
        client: httpx.AsyncClient | None = None,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        api_version: str = API_VERSION,
    ) -> None:
        self._model = model
        self._api_key = api_key
        self._context_window = context_window
        self._max_output_tokens = max_output_tokens
        headers = {"anthropic-version": api_version}
        if api_key:
            headers["x-api-key"] = api_key
        self._http = HttpChannel(
            provider=PROVIDER,
            base_url=base_url or DEFAULT_BASE_URL,
            timeout=timeout,
            headers=headers,
            translate_error=self._translate_error,
            client=client,
            secrets=[api_key],
        )

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self._model!r}, base_url={self._http.base_url!r})"

    @property
    def name(self) -> str:
        return PROVIDER

    @property
    def model(self) -> str:
        return self._model

    def capabilities(self) -> ProviderCapabilities:
        window, output = model_limits(self._model, DEFAULT_LIMITS)
        return ProviderCapabilities(
            tools=True,
            streaming=True,
            vision=True,
            context_window=self._context_window or window,
            max_output_tokens=self._max_output_tokens or output,
        )

    def estimate_tokens(self, messages: Sequence[Message], system: str = "") -> int:
        return estimate_tokens(messages, system)

    async def aclose(self) -> None:
        await self._http.aclose()

    def build_payload(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        extra_system, messages = to_wire_messages(request.messages)
        system = "\n\n".join(s for s in [request.system, *extra_system] if s)
        payload: dict[str, Any] = {
            "model": self._model,
            "max_tokens": request.max_tokens,
            "messages": messages,
            "stream": stream,
        }
        if system:
            payload["system"] = system
        if request.tools:
            payload["tools"] = [to_wire_tool(t) for t in request.tools]
        if request.temperature is not None:
            payload["temperature"] = request.temperature
        return payload

    async def complete(self, request: ModelRequest) -> ModelResponse:
        data, response = await self._http.request_json(
            "POST", "/v1/messages", self.build_payload(request, stream=False)
        )
        text: list[str] = []
        calls: list[ToolCall] = []
        for block in data.get("content") or []:
            if block.get("type") == "text":
                text.append(block.get("text") or "")
            elif block.get("type") == "tool_use":
                calls.append(
                    ToolCall(
                        id=block["id"],
                        name=block["name"],
                        arguments=block.get("input") or {},
                    )
                )
        return ModelResponse(
            message=Message.assistant("".join(text), calls, **response_metadata(data.get("id"))),
            usage=usage_from_wire(data.get("usage") or {}),
            finish_reason=normalise_finish_reason(data.get("stop_reason"), FINISH_REASONS, calls),
            model=data.get("model"),
            request_id=response.headers.get("request-id"),
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        payload = self.build_payload(request, stream=True)
        async with self._http.stream("/v1/messages", payload) as response:
            state = _StreamState(request_id=response.headers.get("request-id"))
            async for sse in iter_sse(response.aiter_lines()):
                if sse.event == "error":
                    raise self._stream_error(sse.data, state.request_id)
                data = decode_object(sse.data, provider=PROVIDER)
                if data.get("type") == "error":
                    # Proxies re-emitting the stream may drop the `event:` line.
                    raise self._stream_error(sse.data, state.request_id)
                for event in state.feed(data):
                    yield event
                if state.stopped:
                    break
        if not state.stopped:
            raise StreamError(
                f"{PROVIDER}: the stream ended before message_stop",
                provider=PROVIDER,
                request_id=state.request_id,
            )
        yield StreamEnd(response=state.response())

    def _translate_error(self, response: httpx.Response) -> ProviderError:
        """Every error response of this API becomes an agent error here."""
        _, message = _read_error(response.text)
        return error_from_response(
            response,
            provider=PROVIDER,
            message=message or f"HTTP {response.status_code}",
            request_id=response.headers.get("request-id"),
            secrets=[self._api_key],
        )

    def _stream_error(self, data: str, request_id: str | None) -> ProviderError:
        error_type, message = _read_error(data)
        return error_for_status(
            ERROR_TYPE_STATUS.get(error_type or "", 500),
            provider=PROVIDER,
            message=message or (error_type or "error event in the stream"),
            body=data,
            request_id=request_id,
            secrets=[self._api_key],
        )


def _read_error(text: str) -> tuple[str | None, str | None]:
    """(error type, message) from `{"type": "error", "error": {"type", "message"}}`."""
    try:
        body = json.loads(text)
    except ValueError:
        return None, None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, None
    return error.get("type"), error.get("message")


@dataclass
class _ToolBlock:
    index: int
    id: str
    name: str
    json_parts: list[str] = field(default_factory=list)
    initial_input: dict[str, Any] = field(default_factory=dict)

    def call(self) -> ToolCall:
        raw = "".join(self.json_parts)
        arguments = parse_arguments(raw) if raw.strip() else self.initial_input
        return ToolCall(id=self.id, name=self.name, arguments=arguments)


@dataclass
class _StreamState:
    """Assembles the reply from the stream's events."""

    request_id: str | None
    text: list[str] = field(default_factory=list)
    tools: dict[int, _ToolBlock] = field(default_factory=dict)  # by content block index
    usage: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    response_id: str | None = None
    stop_reason: str | None = None
    stopped: bool = False

    def feed(self, data: dict[str, Any]) -> list[StreamEvent]:
        kind = data.get("type")
        if kind == "message_start":
            message = data.get("message") or {}
            self.model = message.get("model")
            self.response_id = message.get("id")
            self.usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            block = data.get("content_block") or {}
            if block.get("type") == "tool_use":
                tool = _ToolBlock(
                    index=len(self.tools),
                    id=block.get("id", ""),
                    name=block.get("name", ""),
                    initial_input=block.get("input") or {},
                )
                self.tools[data.get("index", tool.index)] = tool
                return [StreamToolCallDelta(index=tool.index, id=tool.id, name=tool.name)]
            if block.get("type") == "text" and block.get("text"):
                self.text.append(block["text"])
                return [StreamTextDelta(text=block["text"])]
        elif kind == "content_block_delta":
            return self._delta(data.get("index", -1), data.get("delta") or {})
        elif kind == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason")
            # These counts are cumulative, so they replace the ones from message_start.
            self.usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.stopped = True
        # ping, content_block_stop, and event types added later need nothing.
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamEvent]:
        if delta.get("type") == "text_delta" and delta.get("text"):
            self.text.append(delta["text"])
            return [StreamTextDelta(text=delta["text"])]
        if delta.get("type") == "input_json_delta" and index in self.tools:
            tool = self.tools[index]
            fragment = delta.get("partial_json") or ""
            if fragment:
                tool.json_parts.append(fragment)
                return [StreamToolCallDelta(index=tool.index, arguments_fragment=fragment)]
        return []

    def response(self) -> ModelResponse:
        calls = [tool.call() for tool in self.tools.values()]
        return ModelResponse(
            message=Message.assistant(
                "".join(self.text), calls, **response_metadata(self.response_id)
            ),
            usage=usage_from_wire(self.usage),
            finish_reason=normalise_finish_reason(self.stop_reason, FINISH_REASONS, calls),
            model=self.model,
            request_id=self.request_id,
        )
