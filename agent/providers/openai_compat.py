"""OpenAI-compatible Chat Completions (`POST <base>/chat/completions`).

One adapter for OpenAI, OpenRouter, vLLM, LM Studio and llama.cpp's llama-server; the
differences live in a small `Preset`. Wire format, after OpenAI's API reference:
- the system prompt is the first message, `role: system`;
- assistant tool calls are `tool_calls` whose `function.arguments` is a JSON *string*,
  and `content` is null when there is no text;
- each tool result is its own `role: tool` message with `tool_call_id`;
- streaming is SSE `data:` chunks ending with `data: [DONE]`; a call's id and name come
  only in its first chunk, its arguments in pieces over many; with
  `stream_options.include_usage` a last chunk with empty `choices` carries the usage.

Real servers vary: `content` may be null or "", ids may be missing after the first
chunk, some say "stop" for a tool call, OpenRouter sends `: comment` keep-alives and
reports errors inside a 200 stream. All of that is tolerated here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent.context.tokens import estimate_tokens
from agent.errors import ConfigurationError, ProviderError, StreamError
from agent.messages import Message, ToolCall, ToolDefinition, Usage, new_id
from agent.providers.http import (
    HttpChannel,
    ModelDeadlines,
    SseParser,
    decode_object,
    error_for_status,
    error_from_response,
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
    dump_arguments,
    model_limits,
    normalise_finish_reason,
    order_tool_results,
    parse_arguments,
    response_metadata,
    tool_result_text,
)

DEFAULT_TIMEOUT = 120.0
FINISH_REASONS = {"function_call": "tool_calls"}


@dataclass(frozen=True)
class Preset:
    """What differs between OpenAI-compatible servers."""

    name: str
    base_url: str | None  # None: the caller must give one
    default_model: str | None  # None: the caller must give one
    api_key_env: str | None  # the environment variable holding the key, when needed
    # OpenAI's newer models refuse `max_tokens`; other servers only know `max_tokens`.
    max_tokens_field: str = "max_tokens"
    # (context window, max output) for models the table does not know.
    default_limits: tuple[int, int] = (8_192, 2_048)
    attribution: bool = False  # OpenRouter's HTTP-Referer / X-Title headers


PRESETS: dict[str, Preset] = {
    "openai": Preset(
        name="openai",
        base_url="https://api.openai.com/v1",
        default_model="gpt-4o-mini",
        api_key_env="OPENAI_API_KEY",
        max_tokens_field="max_completion_tokens",
        default_limits=(128_000, 16_384),
    ),
    "openrouter": Preset(
        name="openrouter",
        base_url="https://openrouter.ai/api/v1",
        default_model="openai/gpt-4o-mini",
        api_key_env="OPENROUTER_API_KEY",
        default_limits=(128_000, 8_192),
        attribution=True,
    ),
    "vllm": Preset(
        name="vllm",
        base_url="http://127.0.0.1:8000/v1",
        default_model=None,
        api_key_env=None,
    ),
    "lmstudio": Preset(
        name="lmstudio",
        base_url="http://127.0.0.1:1234/v1",
        default_model=None,
        api_key_env=None,
    ),
    "llamacpp": Preset(
        name="llamacpp",
        base_url="http://127.0.0.1:8080/v1",
        # llama-server answers with whatever model it was started with.
        default_model="local-model",
        api_key_env=None,
    ),
    "local": Preset(
        name="local",
        base_url=None,
        default_model="local-model",
        api_key_env=None,
    ),
    "openai-compatible": Preset(
        name="openai-compatible",
        base_url=None,
        default_model=None,
        api_key_env=None,
    ),
}


def to_wire_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    for message in order_tool_results(messages):
        if message.role == "tool":
            wire.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id,
                    "content": tool_result_text(message),
                }
            )
        elif message.role == "assistant" and message.tool_calls:
            wire.append(
                {
                    "role": "assistant",
                    "content": message.content or None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                # Always valid JSON, even for arguments that were not:
                                # some servers re-parse them and reject the request.
                                "arguments": dump_arguments(call.arguments),
                            },
                        }
                        for call in message.tool_calls
                    ],
                }
            )
        else:
            wire.append({"role": message.role, "content": message.content})
    return wire


def to_wire_tool(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def usage_from_wire(usage: dict[str, Any] | None) -> Usage:
    usage = usage or {}
    details = usage.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=usage.get("prompt_tokens") or 0,
        output_tokens=usage.get("completion_tokens") or 0,
        cached_input_tokens=details.get("cached_tokens"),
    )


class OpenAICompatProvider:
    """Chat Completions on OpenAI or any server that speaks its dialect."""

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        preset: str | Preset = "openai",
        timeout: float | ModelDeadlines = DEFAULT_TIMEOUT,
        client: httpx.AsyncClient | None = None,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        app_name: str = "Detective",
        app_url: str | None = None,
        extra_headers: dict[str, str] | None = None,
        stream_usage: bool = True,
    ) -> None:
        if isinstance(preset, str):
            if preset not in PRESETS:
                raise ConfigurationError(
                    f"unknown OpenAI-compatible preset {preset!r}; valid: {', '.join(PRESETS)}"
                )
            preset = PRESETS[preset]
        self.preset = preset
        resolved_model = model or preset.default_model
        resolved_url = base_url or preset.base_url
        if not resolved_model:
            raise ConfigurationError(
                f"{preset.name}: no model given; set DETECTIVE_MODEL to the name the server serves"
            )
        if not resolved_url:
            raise ConfigurationError(
                f"{preset.name}: no base URL given; set DETECTIVE_BASE_URL "
                "(for example http://127.0.0.1:8080/v1)"
            )
        self._model = resolved_model
        self._api_key = api_key
        self._context_window = context_window
        self._max_output_tokens = max_output_tokens
        self._stream_usage = stream_usage
        headers: dict[str, str] = {}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        if preset.attribution:
            # OpenRouter's optional app attribution; the referer only when we have a URL.
            headers["X-Title"] = app_name
            if app_url:
                headers["HTTP-Referer"] = app_url
        headers.update(extra_headers or {})
        self._http = HttpChannel(
            provider=preset.name,
            base_url=resolved_url,
            timeout=timeout,
            headers=headers,
            translate_error=self._translate_error,
            client=client,
            secrets=[api_key],
        )

    def __repr__(self) -> str:
        return (
            f"OpenAICompatProvider(preset={self.preset.name!r}, "
            f"model={self._model!r}, base_url={self._http.base_url!r})"
        )

    @property
    def name(self) -> str:
        return self.preset.name

    @property
    def model(self) -> str:
        return self._model

    def capabilities(self) -> ProviderCapabilities:
        window, output = model_limits(self._model, self.preset.default_limits)
        return ProviderCapabilities(
            tools=True,
            streaming=True,
            vision=False,
            context_window=self._context_window or window,
            max_output_tokens=self._max_output_tokens or output,
        )

    def estimate_tokens(self, messages: Sequence[Message], system: str = "") -> int:
        return estimate_tokens(messages, system)

    async def aclose(self) -> None:
        await self._http.aclose()

    def build_payload(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self._model,
            "messages": to_wire_messages(request.system, request.messages),
            self.preset.max_tokens_field: request.max_tokens,
            "stream": stream,
        }
        if stream and self._stream_usage:
            payload["stream_options"] = {"include_usage": True}
        if request.tools:
            payload["tools"] = [to_wire_tool(t) for t in request.tools]
        if request.temperature is not None:
            payload["temperature"] = request.temperature
        return payload

    async def complete(self, request: ModelRequest) -> ModelResponse:
        data, response = await self._http.request_json(
            "POST", "/chat/completions", self.build_payload(request, stream=False)
        )
        request_id = response.headers.get("x-request-id") or data.get("id")
        if data.get("error"):
            raise self._payload_error(data, request_id)
        choices = data.get("choices") or [{}]
        message = choices[0].get("message") or {}
        calls = [
            ToolCall(
                id=raw.get("id") or new_id("call_"),
                name=(raw.get("function") or {}).get("name", ""),
                arguments=parse_arguments((raw.get("function") or {}).get("arguments")),
            )
            for raw in message.get("tool_calls") or []
        ]
        return ModelResponse(
            message=Message.assistant(
                message.get("content") or "", calls, **response_metadata(data.get("id"))
            ),
            usage=usage_from_wire(data.get("usage")),
            finish_reason=normalise_finish_reason(
                choices[0].get("finish_reason"), FINISH_REASONS, calls
            ),
            model=data.get("model"),
            request_id=request_id,
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        payload = self.build_payload(request, stream=True)
        async with self._http.stream("/chat/completions", payload) as response:
            state = _StreamState(request_id=response.headers.get("x-request-id"))
            parser = SseParser()
            ended = False
            lines = response.aiter_lines()
            while not ended:
                # The lines parsed here rather than through iter_sse: one generator less
                # per chunk.
                try:
                    line = await anext(lines)
                except StopAsyncIteration:
                    sse = parser.end()
                    ended = True
                else:
                    sse = parser.feed(line)
                if sse is None:
                    continue
                if sse.data.strip() == "[DONE]":
                    state.done = True
                    break
                chunk = decode_object(sse.data, provider=self.name)
                if chunk.get("error"):
                    raise self._payload_error(chunk, state.request_id)
                for event in state.feed(chunk):
                    yield event
        if not state.done:
            raise StreamError(
                f"{self.name}: the stream ended before [DONE]",
                provider=self.name,
                request_id=state.request_id,
            )
        yield StreamEnd(response=state.response())

    def _translate_error(self, response: httpx.Response) -> ProviderError:
        """Every error response of these servers becomes an agent error here."""
        return error_from_response(
            response,
            provider=self.name,
            message=_error_message(response.text) or f"HTTP {response.status_code}",
            request_id=response.headers.get("x-request-id"),
            secrets=[self._api_key],
        )

    def _payload_error(self, data: dict[str, Any], request_id: str | None) -> ProviderError:
        """An error sent as a 200 body or inside the stream (OpenRouter does both);
        its `code` is an HTTP status there, when there is one."""
        error = data["error"]
        code = error.get("code") if isinstance(error, dict) else None
        status = code if isinstance(code, int) and 400 <= code < 600 else 502
        return error_for_status(
            status,
            provider=self.name,
            message=_error_message(json.dumps(data)) or "error in the response",
            body=json.dumps(data),
            request_id=request_id,
            secrets=[self._api_key],
        )


def _error_message(text: str) -> str | None:
    """The message of `{"error": {"message": ...}}`, or of `{"error": "..."}` as some
    local servers send it."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:200] or None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return error.get("message") or error.get("type")
    if isinstance(error, str):
        return error
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return None


@dataclass
class _PartialCall:
    index: int
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def call(self) -> ToolCall:
        return ToolCall(
            id=self.id or new_id("call_"),
            name=self.name,
            arguments=parse_arguments("".join(self.arguments)),
        )


@dataclass
class _StreamState:
    """Assembles the reply from the chunks."""

    request_id: str | None
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    model: str | None = None
    response_id: str | None = None
    finish_reason: str | None = None
    done: bool = False

    def feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        self.model = chunk.get("model") or self.model
        self.response_id = self.response_id or chunk.get("id")
        self.request_id = self.request_id or chunk.get("id")
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        events: list[StreamEvent] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
                events.append(StreamTextDelta(text=delta["content"]))
            tool_calls = delta.get("tool_calls")
            if tool_calls:  # not a generator per chunk for the text chunks' missing calls
                events.extend([self._tool_delta(raw) for raw in tool_calls])
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return events

    def _tool_delta(self, raw: dict[str, Any]) -> StreamEvent:
        index = raw.get("index")
        if index is None:
            # Servers that omit the index: a new id starts a new call, otherwise the
            # piece belongs to the latest call.
            is_new = raw.get("id") and all(c.id != raw["id"] for c in self.calls.values())
            index = len(self.calls) if is_new or not self.calls else len(self.calls) - 1
        call = self.calls.setdefault(index, _PartialCall(index=index))
        function = raw.get("function") or {}
        new_id_seen = bool(raw.get("id")) and call.id is None
        new_name_seen = bool(function.get("name")) and not call.name
        if new_id_seen:
            call.id = raw["id"]
        if new_name_seen:
            call.name = function["name"]
        fragment = function.get("arguments") or ""
        if fragment:
            call.arguments.append(fragment)
        return StreamToolCallDelta(
            index=index,
            id=call.id if new_id_seen else None,
            name=call.name if new_name_seen else None,
            arguments_fragment=fragment,
        )

    def response(self) -> ModelResponse:
        calls = [self.calls[i].call() for i in sorted(self.calls)]
        return ModelResponse(
            message=Message.assistant(
                "".join(self.text), calls, **response_metadata(self.response_id)
            ),
            usage=usage_from_wire(self.usage),
            finish_reason=normalise_finish_reason(self.finish_reason, FINISH_REASONS, calls),
            model=self.model,
            request_id=self.request_id,
        )
