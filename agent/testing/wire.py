"""Scripted model servers speaking each provider's real streaming wire format.

A script is a list of `ModelResponse`s (see `agent.testing.fakes.reply`), one per model
call. The builders turn one into the bytes that provider streams:

- `anthropic_sse`: Messages API server-sent events (`message_start`,
  `content_block_start` / `content_block_delta` (`text_delta`, `input_json_delta`) /
  `content_block_stop`, `ping`, `message_delta` with the stop reason and usage,
  `message_stop`);
- `openai_sse`: Chat Completions chunks (`data: {...}`), tool-call arguments split over
  several chunks with the id only in the first, a usage chunk with empty `choices`
  (`stream_options.include_usage`), then `data: [DONE]`;
- `ollama_ndjson`: `/api/chat` NDJSON lines, tool calls with object arguments, and a final
  `done: true` line with `prompt_eval_count` / `eval_count`.

`ScriptedServer` answers consecutive requests with consecutive turns and keeps each
request's JSON body; `mount` puts one on a respx router at the provider's endpoint. The
Django side's tests reuse these to run the real agent against a scripted model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from agent.providers.protocol import ModelResponse
from agent.providers.wire import RAW_ARGUMENTS_KEY

if TYPE_CHECKING:
    import respx

ANTHROPIC_MODEL = "claude-sonnet-4-5"
OPENAI_MODEL = "gpt-4o-mini"
OLLAMA_MODEL = "qwen2.5:7b"


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


def _arguments_json(arguments: dict[str, Any]) -> str:
    """The arguments as the model wrote them: their JSON, or, for a call cut off at the
    output limit (scripted with `RAW_ARGUMENTS_KEY`), the broken text itself."""
    if RAW_ARGUMENTS_KEY in arguments:
        return str(arguments[RAW_ARGUMENTS_KEY])
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def _cut_off(turn: ModelResponse) -> bool:
    """A turn scripted as stopped at the output limit (finish reason "length")."""
    return turn.finish_reason == "length"


def anthropic_sse(
    turn: ModelResponse,
    *,
    model: str = ANTHROPIC_MODEL,
    chunk: int = 12,
    message_id: str = "msg_01scripted",
) -> bytes:
    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"

    usage = turn.usage
    out = [
        event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": usage.input_tokens, "output_tokens": 1},
                },
            },
        ),
        event("ping", {"type": "ping"}),
    ]
    index = 0
    if turn.message.content:
        out.append(
            event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        for piece in _pieces(turn.message.content, chunk):
            out.append(
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            )
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for offset, call in enumerate(turn.message.tool_calls):
        block = index + offset
        out.append(
            event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": block,
                    "content_block": {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": {},
                    },
                },
            )
        )
        for piece in _pieces(_arguments_json(call.arguments), chunk):
            out.append(
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": block,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            )
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": block}))
    stop_reason = "tool_use" if turn.message.tool_calls else "end_turn"
    if _cut_off(turn):
        stop_reason = "max_tokens"
    out.append(
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage.output_tokens},
            },
        )
    )
    out.append(event("message_stop", {"type": "message_stop"}))
    return "".join(out).encode()


def openai_sse(
    turn: ModelResponse,
    *,
    model: str = OPENAI_MODEL,
    chunk: int = 12,
    completion_id: str = "chatcmpl-scripted",
) -> bytes:
    def data(choices: list[dict[str, Any]], **extra: Any) -> str:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    def delta(content: dict[str, Any], finish_reason: str | None = None) -> str:
        return data([{"index": 0, "delta": content, "finish_reason": finish_reason}])

    # Real servers open with the role and an empty (or null) content.
    out = [delta({"role": "assistant", "content": ""})]
    for piece in _pieces(turn.message.content, chunk):
        out.append(delta({"content": piece}))
    for index, call in enumerate(turn.message.tool_calls):
        out.append(
            delta(
                {
                    "content": None,
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ],
                }
            )
        )
        for piece in _pieces(_arguments_json(call.arguments), chunk):
            # Later chunks carry neither the id nor the name.
            out.append(delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    finish = "tool_calls" if turn.message.tool_calls else "stop"
    if _cut_off(turn):
        finish = "length"
    out.append(delta({}, finish))
    usage = turn.usage
    out.append(
        data(
            [],
            usage={
                "prompt_tokens": usage.input_tokens,
                "completion_tokens": usage.output_tokens,
                "total_tokens": usage.total_tokens,
            },
        )
    )
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def ollama_ndjson(turn: ModelResponse, *, model: str = OLLAMA_MODEL, chunk: int = 12) -> bytes:
    created = "2025-01-01T00:00:00.000000Z"

    def line(message: dict[str, Any], done: bool = False, **extra: Any) -> str:
        body = {"model": model, "created_at": created, "message": message, "done": done, **extra}
        return json.dumps(body, ensure_ascii=False) + "\n"

    content = turn.message.content
    calls = turn.message.tool_calls
    if _cut_off(turn) and any(RAW_ARGUMENTS_KEY in call.arguments for call in calls):
        # Ollama parses a tool call out of the model's text only when it is complete: one
        # cut off at the output limit comes back as text.
        content += "".join(_arguments_json(call.arguments) for call in calls)
        calls = []
    out = [line({"role": "assistant", "content": piece}) for piece in _pieces(content, chunk)]
    if calls:
        calls = [{"function": {"name": call.name, "arguments": call.arguments}} for call in calls]
        out.append(line({"role": "assistant", "content": "", "tool_calls": calls}))
    out.append(
        line(
            {"role": "assistant", "content": ""},
            done=True,
            done_reason="length" if _cut_off(turn) else "stop",
            total_duration=1_000_000,
            prompt_eval_count=turn.usage.input_tokens,
            eval_count=turn.usage.output_tokens,
        )
    )
    return "".join(out).encode()


Builder = Callable[..., bytes]

# provider -> (builder, content type, endpoint path under the base URL)
WIRE_FORMATS: dict[str, tuple[Builder, str, str]] = {
    "anthropic": (anthropic_sse, "text/event-stream", "/v1/messages"),
    "openai": (openai_sse, "text/event-stream", "/chat/completions"),
    "ollama": (ollama_ndjson, "application/x-ndjson", "/api/chat"),
}


class ScriptedServer:
    """A respx side effect: the n-th request gets the n-th turn, streamed in `kind`'s
    format. Each request's JSON body is kept in `requests`."""

    def __init__(self, kind: str, turns: Sequence[ModelResponse], **options: Any) -> None:
        self.builder, self.content_type, self.path = WIRE_FORMATS[kind]
        self.kind = kind
        self.turns = list(turns)
        self.options = options
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content or b"{}"))
        if len(self.requests) > len(self.turns):
            return httpx.Response(500, json={"error": "the script has no more turns"})
        turn = self.turns[len(self.requests) - 1]
        return httpx.Response(
            200,
            content=self.builder(turn, **self.options),
            headers={"content-type": self.content_type},
        )


def mount(
    router: respx.MockRouter,
    kind: str,
    base_url: str,
    turns: Sequence[ModelResponse],
    **options: Any,
) -> ScriptedServer:
    """Serve `turns` at `kind`'s chat endpoint under `base_url` on `router`."""
    server = ScriptedServer(kind, turns, **options)
    router.post(base_url.rstrip("/") + server.path).mock(side_effect=server)
    return server
