"""OpenAI-compatible adapter: the provider contract over the Chat Completions wire
format, plus presets and the quirks of real servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx

from agent.errors import ConfigurationError, RateLimitError, ServerError, StreamError
from agent.messages import Message, ToolCall, Usage
from agent.providers.contract_test import (
    API_KEY,
    REQUEST_ID,
    SYSTEM,
    ProviderContract,
    simple_request,
)
from agent.providers.openai_compat import PRESETS, OpenAICompatProvider, Preset
from agent.providers.protocol import StreamEnd, StreamEvent, StreamToolCallDelta
from agent.providers.wire import RAW_ARGUMENTS_KEY

BASE_URL = "https://openai.test/v1"
ENDPOINT = f"{BASE_URL}/chat/completions"
MODEL = "gpt-4o-mini"
RESPONSE_MODEL = "gpt-4o-mini-2024-07-18"
COMPLETION_ID = "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"

ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


def wire_usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens or 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def chunk(delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> str:
    choices = (
        []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    )
    body = {
        "id": COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": 1726000000,
        "model": RESPONSE_MODEL,
        "system_fingerprint": "fp_44709d6fcb",
        "choices": choices,
        **extra,
    }
    return f"data: {json.dumps(body)}\n\n"


def usage_chunk(usage: Usage) -> str:
    return chunk(None, usage=wire_usage(usage))


DONE = "data: [DONE]\n\n"


def completion(message: dict[str, Any], finish_reason: str, usage: Usage) -> dict[str, Any]:
    return {
        "id": COMPLETION_ID,
        "object": "chat.completion",
        "created": 1726000000,
        "model": RESPONSE_MODEL,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": wire_usage(usage),
    }


class TestOpenAICompatContract(ProviderContract):
    provider_name = "openai"
    endpoint = ENDPOINT
    stream_content_type = "text/event-stream; charset=utf-8"
    request_id_header = "x-request-id"
    response_id = COMPLETION_ID

    def make_provider(self, client: httpx.AsyncClient, **options: Any) -> OpenAICompatProvider:
        return OpenAICompatProvider(
            MODEL, BASE_URL, API_KEY, preset="openai", client=client, **options
        )

    def text_response(self, text: str, usage: Usage) -> dict[str, Any]:
        return completion({"role": "assistant", "content": text, "refusal": None}, "stop", usage)

    def tool_call_response(self, call: ToolCall, usage: Usage) -> dict[str, Any]:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
            ],
        }
        return completion(message, "tool_calls", usage)

    def text_stream(self, pieces: list[str], usage: Usage) -> bytes:
        body = chunk({"role": "assistant", "content": "", "refusal": None})
        body += "".join(chunk({"content": piece}) for piece in pieces)
        body += chunk({}, "stop") + usage_chunk(usage) + DONE
        return body.encode()

    def tool_call_stream(
        self, text: str, call_id: str, name: str, fragments: list[str], usage: Usage
    ) -> bytes:
        body = chunk({"role": "assistant", "content": None})
        body += chunk({"content": text})
        body += chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )
        for fragment in fragments:
            # Later chunks carry neither id nor name, only the next piece.
            body += chunk({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]})
        body += chunk({}, "tool_calls") + usage_chunk(usage) + DONE
        return body.encode()

    def cut_off_stream(self) -> bytes:
        body = chunk({"role": "assistant", "content": ""}) + chunk({"content": "Half"})
        return body.encode()

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, code = ERROR_TYPES.get(status, ("server_error", None))
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def assert_auth_headers(self, headers: httpx.Headers) -> None:
        assert headers["authorization"] == f"Bearer {API_KEY}"

    def assert_conversation_payload(self, payload: dict[str, Any]) -> None:
        assert payload == {
            "model": MODEL,
            "max_completion_tokens": 512,
            "stream": False,
            "temperature": 0.2,
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "get_release_summary",
                        "description": "Fetch the summary of a release.",
                        "parameters": {
                            "type": "object",
                            "properties": {"release_id": {"type": "string"}},
                            "required": ["release_id"],
                        },
                    },
                },
                {
                    "type": "function",
                    "function": {
                        "name": "get_test_details",
                        "description": "Fetch the test results of one suite.",
                        "parameters": {
                            "type": "object",
                            "properties": {
                                "release_id": {"type": "string"},
                                "suite": {"type": "string"},
                            },
                            "required": ["release_id", "suite"],
                        },
                    },
                },
            ],
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "Assess release v2.4.0"},
                {
                    "role": "assistant",
                    "content": "Fetching the data.",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "get_release_summary",
                                "arguments": '{"release_id":"v2.4.0"}',
                            },
                        },
                        {
                            "id": "call_2",
                            "type": "function",
                            "function": {
                                "name": "get_test_details",
                                "arguments": '{"release_id":"v2.4.0","suite":"api"}',
                            },
                        },
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_1",
                    "content": "Error: release service unavailable",
                },
                {"role": "tool", "tool_call_id": "call_2", "content": "3 of 120 tests failed"},
                {"role": "user", "content": "Go on."},
            ],
        }


# --- presets and the quirks of real servers ------------------------------------------


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        yield router


def openai(**options: Any) -> OpenAICompatProvider:
    return OpenAICompatProvider(MODEL, BASE_URL, API_KEY, **options)


def stream_route(router: respx.MockRouter, body: str, url: str = ENDPOINT) -> respx.Route:
    return router.post(url).mock(
        return_value=httpx.Response(
            200, content=body.encode(), headers={"content-type": "text/event-stream"}
        )
    )


async def collect(provider: OpenAICompatProvider) -> list[StreamEvent]:
    return [e async for e in provider.stream(simple_request())]


@pytest.mark.asyncio
async def test_openrouter_preset_sends_attribution_headers(router: respx.MockRouter) -> None:
    route = stream_route(
        router,
        ": OPENROUTER PROCESSING\n\n" + chunk({"content": "hi"}) + chunk({}, "stop") + DONE,
        url="https://openrouter.ai/api/v1/chat/completions",
    )
    provider = OpenAICompatProvider(
        "anthropic/claude-sonnet-4",
        api_key=API_KEY,
        preset="openrouter",
        app_url="https://detective.example",
    )
    events = await collect(provider)
    sent = route.calls.last.request
    assert sent.headers["HTTP-Referer"] == "https://detective.example"
    assert sent.headers["X-Title"] == "Detective"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    payload = json.loads(sent.content)
    assert payload["max_tokens"] == 512 and "max_completion_tokens" not in payload
    assert payload["stream_options"] == {"include_usage": True}
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.response.message.content == "hi"
    assert end.response.request_id == COMPLETION_ID  # no x-request-id: the completion id
    assert provider.name == "openrouter"
    assert provider.capabilities().context_window == 200_000
    await provider.aclose()


@pytest.mark.asyncio
async def test_openrouter_without_app_url_sends_only_the_title(router: respx.MockRouter) -> None:
    route = stream_route(
        router, chunk({}, "stop") + DONE, url="https://openrouter.ai/api/v1/chat/completions"
    )
    await collect(OpenAICompatProvider(api_key=API_KEY, preset="openrouter"))
    assert "HTTP-Referer" not in route.calls.last.request.headers


@pytest.mark.asyncio
async def test_local_server_needs_no_key(router: respx.MockRouter) -> None:
    route = stream_route(
        router,
        chunk({"content": "ok"}) + chunk({}, "stop") + DONE,
        url="http://127.0.0.1:8080/v1/chat/completions",
    )
    provider = OpenAICompatProvider(preset="llamacpp")
    await collect(provider)
    assert "authorization" not in route.calls.last.request.headers
    assert provider.model == "local-model"
    assert provider.capabilities().context_window == 8_192


@pytest.mark.parametrize(
    ("preset", "kwargs", "message"),
    [
        ("local", {}, "DETECTIVE_BASE_URL"),
        ("openai-compatible", {"base_url": "http://x.test/v1"}, "DETECTIVE_MODEL"),
        ("vllm", {}, "DETECTIVE_MODEL"),
        ("nonsense", {}, "valid: openai"),
    ],
)
def test_presets_that_need_more_configuration(
    preset: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        OpenAICompatProvider(preset=preset, **kwargs)


def test_a_custom_preset_and_extra_headers() -> None:
    custom = Preset(
        name="gateway", base_url="https://gw.test/v1", default_model="m", api_key_env=None
    )
    provider = OpenAICompatProvider(
        preset=custom, extra_headers={"X-Team": "qa"}, stream_usage=False
    )
    payload = provider.build_payload(simple_request(), stream=True)
    assert "stream_options" not in payload
    assert provider.name == "gateway"
    assert provider._http._headers == {"X-Team": "qa"}
    assert "gateway" in repr(provider)
    assert set(PRESETS) >= {"openai", "openrouter", "vllm", "lmstudio", "llamacpp", "local"}


@pytest.mark.asyncio
async def test_tool_calls_without_index_and_repeated_ids(router: respx.MockRouter) -> None:
    # Some servers omit `index`, repeat the id in every chunk, and say "stop".
    body = chunk(
        {"tool_calls": [{"id": "call_a", "function": {"name": "first", "arguments": '{"a":'}}]}
    )
    body += chunk(
        {"tool_calls": [{"id": "call_a", "function": {"name": "first", "arguments": " 1}"}}]}
    )
    body += chunk(
        {"tool_calls": [{"id": "call_b", "function": {"name": "second", "arguments": "{}"}}]}
    )
    body += chunk({"tool_calls": [{"function": {"arguments": ""}}]})
    body += chunk({}, "stop") + DONE
    stream_route(router, body)
    events = await collect(openai())
    deltas = [e for e in events if isinstance(e, StreamToolCallDelta)]
    assert [(d.index, d.id, d.name) for d in deltas] == [
        (0, "call_a", "first"),
        (0, None, None),
        (1, "call_b", "second"),
        (1, None, None),
    ]
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert [(c.id, c.name, c.arguments) for c in end.response.message.tool_calls] == [
        ("call_a", "first", {"a": 1}),
        ("call_b", "second", {}),
    ]
    assert end.response.finish_reason == "tool_calls"


@pytest.mark.asyncio
async def test_missing_tool_call_id_gets_one(router: respx.MockRouter) -> None:
    body = chunk({"tool_calls": [{"index": 0, "function": {"name": "t", "arguments": "not json"}}]})
    stream_route(router, body + chunk({}, "tool_calls") + DONE)
    end = (await collect(openai()))[-1]
    assert isinstance(end, StreamEnd)
    [call] = end.response.message.tool_calls
    assert call.id.startswith("call_")
    assert call.arguments == {RAW_ARGUMENTS_KEY: "not json"}


@pytest.mark.asyncio
async def test_usage_in_the_last_choice_chunk_and_other_choices_ignored(
    router: respx.MockRouter,
) -> None:
    body = chunk({"content": "a"})
    body += (
        "data: "
        + json.dumps(
            {
                "model": "llama",
                "choices": [
                    {"index": 1, "delta": {"content": "IGNORED"}},
                    {"index": 0, "delta": {"content": None}, "finish_reason": "length"},
                ],
                "usage": {"prompt_tokens": 9, "completion_tokens": 4},
            }
        )
        + "\n\n"
    )
    stream_route(router, body + DONE)
    end = (await collect(openai()))[-1]
    assert isinstance(end, StreamEnd)
    assert end.response.message.content == "a"
    assert end.response.usage == Usage(input_tokens=9, output_tokens=4)
    assert end.response.finish_reason == "length"


@pytest.mark.parametrize(
    ("code", "error_class"),
    [(429, RateLimitError), (502, ServerError), ("server_error", ServerError)],
)
@pytest.mark.asyncio
async def test_error_inside_a_200_stream(
    router: respx.MockRouter, code: Any, error_class: type[Exception]
) -> None:
    error = {"error": {"code": code, "message": "Provider returned error"}}
    stream_route(router, chunk({"content": "x"}) + f"data: {json.dumps(error)}\n\n")
    with pytest.raises(error_class, match="Provider returned error"):
        await collect(openai())


@pytest.mark.asyncio
async def test_error_in_a_200_body(router: respx.MockRouter) -> None:
    router.post(ENDPOINT).mock(
        return_value=httpx.Response(
            200,
            json={"error": {"code": 429, "message": "slow down"}},
            headers={"x-request-id": REQUEST_ID},
        )
    )
    with pytest.raises(RateLimitError) as caught:
        await openai().complete(simple_request())
    assert caught.value.request_id == REQUEST_ID


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"error": "model not loaded"}, "model not loaded"),  # llama.cpp / LM Studio style
        ({"message": "plain"}, "plain"),
        ({"detail": "?"}, "HTTP 400"),
    ],
)
@pytest.mark.asyncio
async def test_error_bodies_of_local_servers(
    router: respx.MockRouter, body: dict[str, Any], message: str
) -> None:
    router.post(ENDPOINT).mock(return_value=httpx.Response(400, json=body))
    with pytest.raises(Exception, match=message):
        await openai().complete(simple_request())


@pytest.mark.asyncio
async def test_plain_text_error_body(router: respx.MockRouter) -> None:
    router.post(ENDPOINT).mock(return_value=httpx.Response(503, text="upstream down"))
    with pytest.raises(ServerError, match="upstream down"):
        await openai().complete(simple_request())


@pytest.mark.asyncio
async def test_complete_tolerates_null_content_and_stop_with_tool_calls(
    router: respx.MockRouter,
) -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"type": "function", "function": {"name": "t", "arguments": ""}}],
    }
    router.post(ENDPOINT).mock(
        return_value=httpx.Response(200, json=completion(message, "stop", Usage()))
    )
    response = await openai().complete(simple_request())
    assert response.message.content == ""
    assert response.message.tool_calls[0].arguments == {}
    assert response.finish_reason == "tool_calls"


@pytest.mark.asyncio
async def test_stream_without_done_is_an_error_even_after_finish(router: respx.MockRouter) -> None:
    stream_route(router, chunk({"content": "x"}) + chunk({}, "stop"))
    with pytest.raises(StreamError, match=r"\[DONE\]"):
        await collect(openai())


@pytest.mark.asyncio
async def test_a_stream_whose_last_event_has_no_blank_line_after_it_still_ends(
    router: respx.MockRouter,
) -> None:
    stream_route(router, chunk({"content": "x"}) + chunk({}, "stop") + "data: [DONE]")
    events = await collect(openai())
    assert isinstance(events[-1], StreamEnd)
    assert events[-1].response.message.content == "x"


def test_request_translation_details() -> None:
    request = simple_request(
        system="",
        messages=[
            Message(role="system", content="Earlier: summary."),
            Message.assistant(
                "", [ToolCall(id="c1", name="t", arguments={RAW_ARGUMENTS_KEY: "{bad"})]
            ),
            Message(
                role="tool",
                tool_call_id="c1",
                name="t",
                content="Error: already said",
                is_error=True,
            ),
            Message.assistant("plain"),
        ],
        tools=[],
        temperature=None,
    )
    payload = openai().build_payload(request, stream=True)
    assert payload["messages"] == [
        {"role": "system", "content": "Earlier: summary."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "t", "arguments": '{"_raw_arguments":"{bad"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Error: already said"},
        {"role": "assistant", "content": "plain"},
    ]
    assert "tools" not in payload and "temperature" not in payload
    assert payload["stream_options"] == {"include_usage": True}


@pytest.mark.asyncio
async def test_a_chunk_that_is_not_an_object_breaks_the_stream(router: respx.MockRouter) -> None:
    stream_route(router, chunk({"content": "x"}) + "data: [1, 2]\n\n" + DONE)
    with pytest.raises(StreamError, match="unreadable"):
        await collect(openai())
