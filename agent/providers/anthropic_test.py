"""Anthropic adapter: the provider contract over the Messages API wire format, plus the
details only this API has."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from agent.errors import (
    AuthenticationError,
    RateLimitError,
    ServerError,
    StreamError,
    ValidationError,
)
from agent.messages import Message, ToolCall, Usage
from agent.providers.anthropic import AnthropicProvider
from agent.providers.contract_test import (
    API_KEY,
    REQUEST_ID,
    SYSTEM,
    ProviderContract,
    simple_request,
)
from agent.providers.protocol import StreamEnd, StreamRetry, StreamTextDelta, StreamToolCallDelta
from agent.providers.wire import RAW_ARGUMENTS_KEY
from agent.retry import RetryingProvider

BASE_URL = "https://anthropic.test"
ENDPOINT = f"{BASE_URL}/v1/messages"
MODEL = "claude-sonnet-4-5"
RESPONSE_MODEL = "claude-sonnet-4-5-20250929"

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def wire_usage(usage: Usage) -> dict[str, Any]:
    """Anthropic counts cache reads apart from `input_tokens`."""
    cached = usage.cached_input_tokens or 0
    return {
        "input_tokens": usage.input_tokens - cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": usage.output_tokens,
    }


def message_start(usage: Usage) -> str:
    start_usage = wire_usage(usage) | {"output_tokens": 1}
    return sse(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": RESPONSE_MODEL,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        },
    )


def text_block(index: int, pieces: list[str]) -> str:
    out = sse(
        "content_block_start",
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        },
    )
    for piece in pieces:
        out += sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": piece},
            },
        )
    return out + sse("content_block_stop", {"type": "content_block_stop", "index": index})


def tool_block(index: int, call_id: str, name: str, fragments: list[str]) -> str:
    out = sse(
        "content_block_start",
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
        },
    )
    for fragment in ["", *fragments]:  # the API opens with an empty partial_json
        out += sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": fragment},
            },
        )
    return out + sse("content_block_stop", {"type": "content_block_stop", "index": index})


def message_end(stop_reason: str, usage: Usage) -> str:
    return sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": usage.output_tokens},
        },
    ) + sse("message_stop", {"type": "message_stop"})


def message_body(content: list[dict[str, Any]], stop_reason: str, usage: Usage) -> dict[str, Any]:
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": RESPONSE_MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": wire_usage(usage),
    }


class TestAnthropicContract(ProviderContract):
    provider_name = "anthropic"
    endpoint = ENDPOINT
    stream_content_type = "text/event-stream; charset=utf-8"
    request_id_header = "request-id"
    response_id = "msg_01XFDUDYJgAACzvnptvVoYEL"
    extra_error_statuses = [(529, ServerError), (413, ValidationError)]

    def make_provider(self, client: httpx.AsyncClient, **options: Any) -> AnthropicProvider:
        return AnthropicProvider(MODEL, BASE_URL, API_KEY, client=client, **options)

    def text_response(self, text: str, usage: Usage) -> dict[str, Any]:
        return message_body([{"type": "text", "text": text}], "end_turn", usage)

    def tool_call_response(self, call: ToolCall, usage: Usage) -> dict[str, Any]:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        return message_body([block], "tool_use", usage)

    def text_stream(self, pieces: list[str], usage: Usage) -> bytes:
        body = message_start(usage) + sse("ping", {"type": "ping"})
        return (body + text_block(0, pieces) + message_end("end_turn", usage)).encode()

    def tool_call_stream(
        self, text: str, call_id: str, name: str, fragments: list[str], usage: Usage
    ) -> bytes:
        body = message_start(usage) + text_block(0, [text])
        body += tool_block(1, call_id, name, fragments) + message_end("tool_use", usage)
        return body.encode()

    def cut_off_stream(self) -> bytes:
        body = message_start(Usage(input_tokens=10)) + sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        body += sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Half"},
            },
        )
        return body.encode()

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
        }

    def assert_auth_headers(self, headers: httpx.Headers) -> None:
        assert headers["x-api-key"] == API_KEY
        assert headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in headers

    def assert_conversation_payload(self, payload: dict[str, Any]) -> None:
        assert payload == {
            "model": MODEL,
            "max_tokens": 512,
            "stream": False,
            "temperature": 0.2,
            "system": SYSTEM,
            "tools": [
                {
                    "name": "get_release_summary",
                    "description": "Fetch the summary of a release.",
                    "input_schema": {
                        "type": "object",
                        "properties": {"release_id": {"type": "string"}},
                        "required": ["release_id"],
                    },
                },
                {
                    "name": "get_test_details",
                    "description": "Fetch the test results of one suite.",
                    "input_schema": {
                        "type": "object",
                        "properties": {
                            "release_id": {"type": "string"},
                            "suite": {"type": "string"},
                        },
                        "required": ["release_id", "suite"],
                    },
                },
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Assess release v2.4.0"}]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Fetching the data."},
                        {
                            "type": "tool_use",
                            "id": "call_1",
                            "name": "get_release_summary",
                            "input": {"release_id": "v2.4.0"},
                        },
                        {
                            "type": "tool_use",
                            "id": "call_2",
                            "name": "get_test_details",
                            "input": {"release_id": "v2.4.0", "suite": "api"},
                        },
                    ],
                },
                # Both results in ONE user message, in the order of the calls, then the
                # user's next words in the same turn.
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "call_1",
                            "content": "release service unavailable",
                            "is_error": True,
                        },
                        {
                            "type": "tool_result",
                            "tool_use_id": "call_2",
                            "content": "3 of 120 tests failed",
                        },
                        {"type": "text", "text": "Go on."},
                    ],
                },
            ],
        }


# --- what only Anthropic has ---------------------------------------------------------


@pytest.fixture
def router() -> respx.MockRouter:
    with respx.mock(assert_all_called=False) as router:
        yield router


def provider(**options: Any) -> AnthropicProvider:
    return AnthropicProvider(MODEL, BASE_URL, API_KEY, **options)


def stream_route(router: respx.MockRouter, body: str) -> respx.Route:
    return router.post(ENDPOINT).mock(
        return_value=httpx.Response(
            200,
            content=body.encode(),
            headers={"content-type": "text/event-stream", "request-id": REQUEST_ID},
        )
    )


@pytest.mark.parametrize(
    ("error_type", "error_class"),
    [
        ("overloaded_error", ServerError),
        ("api_error", ServerError),
        ("rate_limit_error", RateLimitError),
        ("authentication_error", AuthenticationError),
        ("invalid_request_error", ValidationError),
        ("something_new", ServerError),
    ],
)
@pytest.mark.asyncio
async def test_error_event_mid_stream_raises_the_matching_error(
    router: respx.MockRouter, error_type: str, error_class: type[Exception]
) -> None:
    body = message_start(Usage(input_tokens=5)) + text_block(0, ["Hel"])
    body += sse("error", {"type": "error", "error": {"type": error_type, "message": "Overloaded"}})
    stream_route(router, body)
    events = []
    with pytest.raises(error_class) as caught:
        async for event in provider().stream(simple_request()):
            events.append(event)
    assert events == [StreamTextDelta(text="Hel")]
    assert caught.value.request_id == REQUEST_ID  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_unreadable_error_event_is_still_a_server_error(router: respx.MockRouter) -> None:
    stream_route(router, message_start(Usage()) + "event: error\ndata: oops\n\n")
    with pytest.raises(ServerError):
        async for _ in provider().stream(simple_request()):
            pass


@pytest.mark.asyncio
async def test_malformed_tool_arguments_are_kept_raw(router: respx.MockRouter) -> None:
    body = message_start(Usage()) + tool_block(0, "toolu_1", "get_release_summary", ['{"rel'])
    stream_route(router, body + message_end("tool_use", Usage()))
    events = [e async for e in provider().stream(simple_request())]
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.response.message.tool_calls[0].arguments == {RAW_ARGUMENTS_KEY: '{"rel'}


@pytest.mark.asyncio
async def test_tool_without_arguments_and_unknown_events(router: respx.MockRouter) -> None:
    body = message_start(Usage())
    body += sse(
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": ""},
        },
    )
    body += sse(
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hm"},
        },
    )
    body += sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    body += tool_block(1, "toolu_2", "list_releases", [])
    body += sse("future_event", {"type": "future_event"})
    stream_route(router, body + message_end("tool_use", Usage()))
    events = [e async for e in provider().stream(simple_request())]
    assert events[0] == StreamToolCallDelta(index=0, id="toolu_2", name="list_releases")
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.response.message.tool_calls[0].arguments == {}
    assert end.response.message.content == ""


@pytest.mark.asyncio
async def test_stream_usage_counts_cache_reads_and_writes_in_the_prompt(
    router: respx.MockRouter,
) -> None:
    start = sse(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "model": RESPONSE_MODEL,
                "usage": {
                    "input_tokens": 10,
                    "cache_creation_input_tokens": 100,
                    "cache_read_input_tokens": 1000,
                    "output_tokens": 1,
                },
            },
        },
    )
    stream_route(
        router, start + text_block(0, ["ok"]) + message_end("max_tokens", Usage(output_tokens=33))
    )
    events = [e async for e in provider().stream(simple_request())]
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.response.usage == Usage(
        input_tokens=1110, output_tokens=33, cached_input_tokens=1000
    )
    assert end.response.finish_reason == "length"


@pytest.mark.asyncio
async def test_stream_without_message_stop_is_an_error(router: respx.MockRouter) -> None:
    body = message_start(Usage()) + text_block(0, ["done"])
    body += sse(
        "message_delta",
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
    )
    stream_route(router, body)
    with pytest.raises(StreamError, match="message_stop"):
        async for _ in provider().stream(simple_request()):
            pass


@pytest.mark.asyncio
async def test_unreadable_data_breaks_the_stream(router: respx.MockRouter) -> None:
    stream_route(router, message_start(Usage()) + "event: content_block_delta\ndata: {broken\n\n")
    with pytest.raises(StreamError, match="unreadable"):
        async for _ in provider().stream(simple_request()):
            pass


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
@pytest.mark.asyncio
async def test_stop_reasons_are_normalised(
    router: respx.MockRouter, stop_reason: str, expected: str
) -> None:
    router.post(ENDPOINT).mock(
        return_value=httpx.Response(
            200, json=message_body([{"type": "text", "text": "x"}], stop_reason, Usage())
        )
    )
    response = await provider().complete(simple_request())
    assert response.finish_reason == expected
    assert response.request_id is None


@pytest.mark.asyncio
async def test_non_json_success_body_is_a_server_error(router: respx.MockRouter) -> None:
    router.post(ENDPOINT).mock(return_value=httpx.Response(200, text="<html>proxy</html>"))
    with pytest.raises(ServerError, match="not JSON"):
        await provider().complete(simple_request())


@pytest.mark.asyncio
async def test_non_json_error_body_still_maps_by_status(router: respx.MockRouter) -> None:
    router.post(ENDPOINT).mock(return_value=httpx.Response(502, text="Bad Gateway"))
    with pytest.raises(ServerError, match="HTTP 502") as caught:
        await provider().complete(simple_request())
    assert caught.value.body == "Bad Gateway"


def test_system_messages_join_the_system_prompt_and_empty_turns_are_dropped() -> None:
    request = simple_request(
        system="Base prompt.",
        messages=[
            Message(role="system", content="Summary of earlier work."),
            Message.user("first"),
            Message.assistant(""),  # an empty reply: the API rejects empty content
            Message.user("second"),
        ],
        tools=[],
        temperature=None,
    )
    payload = provider().build_payload(request, stream=True)
    assert payload["system"] == "Base prompt.\n\nSummary of earlier work."
    assert payload["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
        }
    ]
    assert "tools" not in payload and "temperature" not in payload
    assert payload["stream"] is True


def test_no_system_prompt_means_no_system_field() -> None:
    payload = provider().build_payload(simple_request(system=""), stream=False)
    assert "system" not in payload


@pytest.mark.parametrize(
    ("model", "window", "output"),
    [
        ("claude-sonnet-4-5", 200_000, 64_000),
        ("claude-opus-4-1-20250805", 200_000, 32_000),
        ("claude-3-5-haiku-latest", 200_000, 8_192),
        ("claude-next-unknown", 200_000, 8_192),
    ],
)
def test_capabilities_from_the_model_table(model: str, window: int, output: int) -> None:
    capabilities = AnthropicProvider(model).capabilities()
    assert (capabilities.context_window, capabilities.max_output_tokens) == (window, output)
    assert capabilities.vision is True


@pytest.mark.asyncio
async def test_owned_client_is_closed_and_no_key_sends_no_key_header(
    router: respx.MockRouter,
) -> None:
    route = router.post("https://api.anthropic.com/v1/messages").mock(
        return_value=httpx.Response(200, json=message_body([], "end_turn", Usage()))
    )
    adapter = AnthropicProvider()
    assert adapter.model == "claude-sonnet-4-5"
    await adapter.complete(simple_request())
    assert "x-api-key" not in route.calls.last.request.headers
    await adapter.aclose()
    assert adapter._http._client.is_closed


@pytest.mark.asyncio
async def test_text_arriving_in_content_block_start(router: respx.MockRouter) -> None:
    body = message_start(Usage()) + sse(
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": "Hi"},
        },
    )
    body += sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    stream_route(router, body + message_end("end_turn", Usage()))
    events = [e async for e in provider().stream(simple_request())]
    assert events[0] == StreamTextDelta(text="Hi")
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.response.message.content == "Hi"


@pytest.mark.asyncio
async def test_json_error_body_without_an_error_object(router: respx.MockRouter) -> None:
    router.post(ENDPOINT).mock(return_value=httpx.Response(401, json={"message": "nope"}))
    with pytest.raises(AuthenticationError, match="HTTP 401"):
        await provider().complete(simple_request())


@pytest.mark.asyncio
async def test_retrying_an_overloaded_then_broken_stream(router: respx.MockRouter) -> None:
    overloaded = httpx.Response(
        529,
        json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        headers={"retry-after": "2"},
    )
    cut_off = message_start(Usage()) + text_block(0, ["Hal"])
    whole = message_start(Usage(input_tokens=9)) + text_block(0, ["Hello"])
    whole += message_end("end_turn", Usage(output_tokens=2))
    router.post(ENDPOINT).mock(
        side_effect=[
            overloaded,
            httpx.Response(200, content=cut_off.encode()),
            httpx.Response(200, content=whole.encode()),
        ]
    )
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    retrying = RetryingProvider(provider(), sleep=sleep, random=lambda: 0.0)
    events = [e async for e in retrying.stream(simple_request())]
    retries = [e for e in events if isinstance(e, StreamRetry)]
    assert [(r.attempt, r.error_type, r.partial_discarded) for r in retries] == [
        (1, "ServerError", False),
        (2, "StreamError", True),
    ]
    assert delays == [2.0, 2.0]  # the server's retry-after, then 1s * 2 for attempt 2
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.response.message.content == "Hello"


@pytest.mark.asyncio
async def test_error_data_without_an_event_line(router: respx.MockRouter) -> None:
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}
    stream_route(router, message_start(Usage()) + f"data: {json.dumps(error)}\n\n")
    with pytest.raises(RateLimitError, match="slow"):
        async for _ in provider().stream(simple_request()):
            pass
