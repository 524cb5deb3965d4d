"""Ollama's native chat API (`POST /api/chat`).

Wire format, after Ollama's API reference:
- the system prompt is the first message, `role: system`;
- assistant tool calls carry their arguments as JSON *objects*, and come whole (one
  stream line may hold a complete call) rather than in fragments;
- tool results are `role: tool` messages naming the tool in `tool_name`;
- streaming is NDJSON: one JSON object a line, the last with `done: true`, the token
  counts (`prompt_eval_count`, `eval_count`) and `done_reason`.

`options.num_ctx` is always sent. Without it Ollama runs the model with its small
default context and silently drops the start of a longer conversation (the system prompt
first), so the reply degrades without any error.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from agent.context.tokens import estimate_tokens
from agent.errors import NetworkError, NotFoundError, ProviderError, StreamError
from agent.messages import Message, ToolCall, ToolDefinition, Usage, new_id
from agent.providers.http import (
    HttpChannel,
    ModelDeadlines,
    error_for_status,
    error_from_response,
    iter_ndjson,
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
    normalise_finish_reason,
    order_tool_results,
    parse_arguments,
    tool_result_text,
)

PROVIDER = "ollama"
DEFAULT_BASE_URL = "http://127.0.0.1:11434"
DEFAULT_MODEL = "qwen2.5:7b"
# Local models load slowly on a first request; a cloud-sized timeout would cut them off.
DEFAULT_TIMEOUT = 300.0
# A context a laptop can hold for a 7-8B model; far above Ollama's own default, and the
# `context_window` argument raises it where the hardware allows.
DEFAULT_CONTEXT_WINDOW = 16_384
DEFAULT_MAX_OUTPUT = 4_096
FINISH_REASONS: dict[str, str] = {}


class OllamaHealth(BaseModel):
    """What `health_check` found."""

    model_config = ConfigDict(frozen=True)

    base_url: str
    model: str
    model_context_length: int | None  # the most the model supports, from /api/show
    num_ctx: int  # what this adapter sends


def to_wire_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    for message in order_tool_results(messages):
        if message.role == "tool":
            wire.append(
                {
                    "role": "tool",
                    "content": tool_result_text(message),
                    "tool_name": message.name,
                    "tool_call_id": message.tool_call_id,
                }
            )
        elif message.role == "assistant" and message.tool_calls:
            wire.append(
                {
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "function": {
                                "name": call.name,
                                "arguments": call.arguments,
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


def usage_from_wire(data: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=data.get("prompt_eval_count") or 0,
        output_tokens=data.get("eval_count") or 0,
    )


def call_from_wire(raw: dict[str, Any]) -> ToolCall:
    function = raw.get("function") or {}
    arguments = function.get("arguments")
    if not isinstance(arguments, dict):
        arguments = parse_arguments(arguments if isinstance(arguments, str) else None)
    # Ollama gives calls no id (newer versions do); the loop needs one to pair results.
    return ToolCall(
        id=raw.get("id") or new_id("call_"),
        name=function.get("name", ""),
        arguments=arguments,
    )


def _with_tag(model: str) -> str:
    return model if ":" in model.rsplit("/", 1)[-1] else f"{model}:latest"


class OllamaProvider:
    """A model served by a local (or remote) Ollama."""

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
        keep_alive: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self._model = model
        self._api_key = api_key
        self._context_window = context_window
        self._max_output_tokens = max_output_tokens
        self._model_context_length: int | None = None
        self._keep_alive = keep_alive
        self._options = dict(options or {})
        url = base_url or DEFAULT_BASE_URL
        # A key only matters for Ollama behind an authenticating proxy or its cloud.
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = HttpChannel(
            provider=PROVIDER,
            base_url=url,
            timeout=timeout,
            headers=headers,
            translate_error=self._translate_error,
            client=client,
            secrets=[api_key],
            unreachable_hint="is Ollama running? Start it with `ollama serve`",
        )

    def __repr__(self) -> str:
        return f"OllamaProvider(model={self._model!r}, base_url={self._http.base_url!r})"

    @property
    def name(self) -> str:
        return PROVIDER

    @property
    def model(self) -> str:
        return self._model

    def capabilities(self) -> ProviderCapabilities:
        window = self._context_window or DEFAULT_CONTEXT_WINDOW
        if self._context_window is None and self._model_context_length:
            window = min(window, self._model_context_length)
        return ProviderCapabilities(
            tools=True,
            streaming=True,
            vision=False,
            context_window=window,
            max_output_tokens=self._max_output_tokens or DEFAULT_MAX_OUTPUT,
        )

    def estimate_tokens(self, messages: Sequence[Message], system: str = "") -> int:
        return estimate_tokens(messages, system)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def health_check(self) -> OllamaHealth:
        """Say plainly whether Ollama answers and has the model; learn the model's
        largest context on the way."""
        base_url = self._http.base_url
        try:
            tags, _ = await self._http.request_json("GET", "/api/tags")
        except NetworkError as exc:
            raise NetworkError(f"Ollama is not running at {base_url}", provider=PROVIDER) from exc
        pulled = {
            _with_tag(m.get("name") or m.get("model") or "")
            for m in (tags or {}).get("models") or []
        }
        not_pulled = NotFoundError(
            f"model {self._model} is not pulled; run `ollama pull {self._model}`",
            provider=PROVIDER,
        )
        if _with_tag(self._model) not in pulled:
            raise not_pulled
        try:
            show, _ = await self._http.request_json("POST", "/api/show", {"model": self._model})
        except NotFoundError as exc:
            raise not_pulled from exc
        info = (show or {}).get("model_info") or {}
        lengths = [v for k, v in info.items() if k.endswith(".context_length")]
        if lengths and isinstance(lengths[0], int):
            self._model_context_length = lengths[0]
        return OllamaHealth(
            base_url=base_url,
            model=self._model,
            model_context_length=self._model_context_length,
            num_ctx=self.capabilities().context_window,
        )

    def build_payload(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        options: dict[str, Any] = {
            **self._options,
            "num_ctx": self.capabilities().context_window,
            "num_predict": request.max_tokens,
        }
        if request.temperature is not None:
            options["temperature"] = request.temperature
        payload: dict[str, Any] = {
            "model": self._model,
            "messages": to_wire_messages(request.system, request.messages),
            "stream": stream,
            "options": options,
        }
        if request.tools:
            payload["tools"] = [to_wire_tool(t) for t in request.tools]
        if self._keep_alive is not None:
            payload["keep_alive"] = self._keep_alive
        return payload

    async def complete(self, request: ModelRequest) -> ModelResponse:
        data, _ = await self._http.request_json(
            "POST", "/api/chat", self.build_payload(request, stream=False)
        )
        if data.get("error"):
            raise self._line_error(data)
        message = data.get("message") or {}
        calls = [call_from_wire(raw) for raw in message.get("tool_calls") or []]
        return ModelResponse(
            message=Message.assistant(message.get("content") or "", calls),
            usage=usage_from_wire(data),
            finish_reason=normalise_finish_reason(data.get("done_reason"), FINISH_REASONS, calls),
            model=data.get("model"),
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        payload = self.build_payload(request, stream=True)
        state = _StreamState()
        async with self._http.stream("/api/chat", payload) as response:
            async for line in iter_ndjson(response.aiter_lines(), provider=PROVIDER):
                if line.get("error"):
                    raise self._line_error(line)
                for event in state.feed(line):
                    yield event
                if state.done:
                    break
        if not state.done:
            raise StreamError(f"{PROVIDER}: the stream ended before done: true", provider=PROVIDER)
        yield StreamEnd(response=state.response())

    def _translate_error(self, response: httpx.Response) -> ProviderError:
        """Every error response of Ollama becomes an agent error here."""
        message = _error_message(response) or f"HTTP {response.status_code}"
        if response.status_code == 404:
            message += f" (is the model pulled? run `ollama pull {self._model}`)"
        return error_from_response(
            response,
            provider=PROVIDER,
            message=message,
            request_id=None,
            secrets=[self._api_key],
        )

    def _line_error(self, data: dict[str, Any]) -> ProviderError:
        """An error Ollama reports in a 200 body or stream line: the model crashed or
        ran out of memory mid-reply, which is worth another try."""
        return error_for_status(
            500,
            provider=PROVIDER,
            message=str(data.get("error")),
            body=json.dumps(data),
            secrets=[self._api_key],
        )


def _error_message(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:200] or None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"]
    return None


@dataclass
class _StreamState:
    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    done: bool = False

    def feed(self, line: dict[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        message = line.get("message") or {}
        if message.get("content"):
            self.text.append(message["content"])
            events.append(StreamTextDelta(text=message["content"]))
        for raw in message.get("tool_calls") or []:
            call = call_from_wire(raw)
            events.append(
                StreamToolCallDelta(
                    index=len(self.calls),
                    id=call.id,
                    name=call.name,
                    arguments_fragment=dump_arguments(call.arguments),
                )
            )
            self.calls.append(call)
        if line.get("done"):
            self.final = line
            self.done = True
        return events

    def response(self) -> ModelResponse:
        return ModelResponse(
            message=Message.assistant("".join(self.text), self.calls),
            usage=usage_from_wire(self.final),
            finish_reason=normalise_finish_reason(
                self.final.get("done_reason"), FINISH_REASONS, self.calls
            ),
            model=self.final.get("model"),
        )
