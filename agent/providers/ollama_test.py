"""Ollama adapter: the provider contract over the native /api/chat NDJSON wire format,
plus num_ctx and the health check."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx

from agent.errors import NetworkError, NotFoundError, ProviderError, ServerError, StreamError
from agent.messages import Message, ToolCall, Usage
from agent.providers.contract_test import (
    API_KEY,
    SYSTEM,
    ProviderContract,
    simple_request,
)
from agent.providers.ollama import DEFAULT_CONTEXT_WINDOW, OllamaProvider
from agent.providers.protocol import StreamEnd, StreamToolCallDelta
from agent.providers.wire import RAW_ARGUMENTS_KEY

BASE_URL = "http://ollama.test:11434"
ENDPOINT = f"{BASE_URL}/api/chat"
MODEL = "qwen2.5:7b"


def line(body: dict[str, Any]) -> str:
    return json.dumps(body) + "\n"


def partial(message: dict[str, Any]) -> str:
    return line(
        {
            "model": MODEL,
            "created_at": "2025-05-27T22:54:57.641643Z",
            "message": {"role": "assistant", **message},
            "done": False,
        }
    )


def final(usage: Usage, done_reason: str = "stop", **message: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "created_at": "2025-05-27T22:54:58.100509Z",
        "message": {"role": "assistant", "content": "", **message},
        "done": True,
        "done_reason": done_reason,
        "total_duration": 4883583458,
        "load_duration": 1334875,
        "prompt_eval_count": usage.input_tokens,
        "prompt_eval_duration": 342546000,
        "eval_count": usage.output_tokens,
        "eval_duration": 4535599000,
    }


class TestOllamaContract(ProviderContract):
    provider_name = "ollama"
    endpoint = ENDPOINT
    stream_content_type = "application/x-ndjson"
    request_id_header = None
    reports_cached_tokens = False

    def make_provider(self, client: httpx.AsyncClient, **options: Any) -> OllamaProvider:
        return OllamaProvider(MODEL, BASE_URL, API_KEY, client=client, **options)

    def text_response(self, text: str, usage: Usage) -> dict[str, Any]:
        return final(usage, content=text)

    def tool_call_response(self, call: ToolCall, usage: Usage) -> dict[str, Any]:
        return final(
            usage,
            tool_calls=[{"function": {"name": call.name, "arguments": call.arguments}}],
        )

    def text_stream(self, pieces: list[str], usage: Usage) -> bytes:
        body = "".join(partial({"content": piece}) for piece in pieces)
        return (body + line(final(usage))).encode()

    def tool_call_stream(
        self, text: str, call_id: str, name: str, fragments: list[str], usage: Usage
    ) -> bytes:
        # Ollama parses the model's output itself and streams each call whole, its
        # arguments as an object: there are no fragments to split.
        arguments = json.loads("".join(fragments))
        body = partial({"content": text})
        body += partial(
            {
                "content": "",
                "tool_calls": [
                    {"id": call_id, "function": {"index": 0, "name": name, "arguments": arguments}}
                ],
            }
        )
        return (body + line(final(usage))).encode()

    def cut_off_stream(self) -> bytes:
        return (partial({"content": "Half"}) + partial({"content": " a reply"})).encode()

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": message}

    def assert_auth_headers(self, headers: httpx.Headers) -> None:
        assert headers["authorization"] == f"Bearer {API_KEY}"

    def assert_conversation_payload(self, payload: dict[str, Any]) -> None:
        assert payload == {
            "model": MODEL,
            "stream": False,
            "options": {"num_ctx": DEFAULT_CONTEXT_WINDOW, "num_predict": 512, "temperature": 0.2},
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
                            "function": {
                                "name": "get_release_summary",
                                "arguments": {"release_id": "v2.4.0"},
                            },
                        },
                        {
                            "id": "call_2",
                            "function": {
                                "name": "get_test_details",
                                "arguments": {"release_id": "v2.4.0", "suite": "api"},
                            },
                        },
                    ],
                },
                {
                    "role": "tool",
                    "content": "Error: release service unavailable",
                    "tool_name": "get_release_summary",
                    "tool_call_id": "call_1",
                },
                {
                    "role": "tool",
                    "content": "3 of 120 tests failed",
                    "tool_name": "get_test_details",
                    "tool_call_id": "call_2",
                },
                {"role": "user", "content": "Go on."},
            ],
        }


# --- num_ctx, health check, and Ollama's own quirks ----------------------------------


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        yield router


def ollama(**options: Any) -> OllamaProvider:
    return OllamaProvider(MODEL, BASE_URL, **options)


def tags(*names: str) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "models": [
                {"name": name, "model": name, "size": 4683087332, "details": {"family": "qwen2"}}
                for name in names
            ]
        },
    )


def show(context_length: int) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "details": {"family": "qwen2"},
            "model_info": {
                "general.architecture": "qwen2",
                "qwen2.context_length": context_length,
            },
        },
    )


def test_num_ctx_is_always_sent() -> None:
    payload = ollama().build_payload(simple_request(temperature=None), stream=True)
    assert payload["options"] == {"num_ctx": DEFAULT_CONTEXT_WINDOW, "num_predict": 512}
    assert payload["stream"] is True
    assert "keep_alive" not in payload


def test_num_ctx_follows_the_context_window_override_and_options_merge() -> None:
    provider = ollama(context_window=32_768, keep_alive="10m", options={"num_ctx": 1, "top_k": 20})
    payload = provider.build_payload(simple_request(tools=[]), stream=False)
    assert payload["options"] == {"num_ctx": 32_768, "num_predict": 512, "top_k": 20}
    assert payload["keep_alive"] == "10m"
    assert "tools" not in payload


@pytest.mark.asyncio
async def test_health_check_learns_the_model_context_and_caps_num_ctx(
    router: respx.MockRouter,
) -> None:
    router.get(f"{BASE_URL}/api/tags").mock(return_value=tags("llama3.2:latest", MODEL))
    show_route = router.post(f"{BASE_URL}/api/show").mock(return_value=show(8_192))
    provider = ollama()
    health = await provider.health_check()
    assert json.loads(show_route.calls.last.request.content) == {"model": MODEL}
    assert health.model_context_length == 8_192
    assert health.num_ctx == 8_192
    assert provider.build_payload(simple_request(), stream=True)["options"]["num_ctx"] == 8_192


@pytest.mark.asyncio
async def test_health_check_keeps_a_smaller_default(router: respx.MockRouter) -> None:
    router.get(f"{BASE_URL}/api/tags").mock(return_value=tags("llama3.2:latest"))
    router.post(f"{BASE_URL}/api/show").mock(return_value=show(131_072))
    health = await OllamaProvider("llama3.2", BASE_URL).health_check()  # ":latest" implied
    assert health.num_ctx == DEFAULT_CONTEXT_WINDOW
    assert health.model_context_length == 131_072


@pytest.mark.asyncio
async def test_health_check_says_when_ollama_is_not_running(router: respx.MockRouter) -> None:
    router.get(f"{BASE_URL}/api/tags").mock(side_effect=httpx.ConnectError("Connection refused"))
    with pytest.raises(NetworkError) as caught:
        await ollama().health_check()
    assert str(caught.value) == f"Ollama is not running at {BASE_URL}"


@pytest.mark.asyncio
async def test_health_check_says_when_the_model_is_not_pulled(router: respx.MockRouter) -> None:
    router.get(f"{BASE_URL}/api/tags").mock(return_value=tags("llama3.2:latest"))
    with pytest.raises(NotFoundError) as caught:
        await ollama().health_check()
    assert str(caught.value) == f"model {MODEL} is not pulled; run `ollama pull {MODEL}`"


@pytest.mark.asyncio
async def test_health_check_when_show_does_not_know_the_model(router: respx.MockRouter) -> None:
    router.get(f"{BASE_URL}/api/tags").mock(return_value=tags(MODEL))
    router.post(f"{BASE_URL}/api/show").mock(
        return_value=httpx.Response(404, json={"error": f"model '{MODEL}' not found"})
    )
    with pytest.raises(NotFoundError, match="is not pulled"):
        await ollama().health_check()


@pytest.mark.asyncio
async def test_not_found_on_chat_suggests_pulling(router: respx.MockRouter) -> None:
    router.post(ENDPOINT).mock(
        return_value=httpx.Response(
            404, json={"error": f'model "{MODEL}" not found, try pulling it first'}
        )
    )
    with pytest.raises(NotFoundError, match=re.escape("ollama pull qwen2.5:7b")):
        await ollama().complete(simple_request())


@pytest.mark.asyncio
async def test_unreachable_ollama_hints_at_ollama_serve(router: respx.MockRouter) -> None:
    router.post(ENDPOINT).mock(side_effect=httpx.ConnectError("Connection refused"))
    with pytest.raises(NetworkError, match="ollama serve"):
        await ollama().complete(simple_request())


@pytest.mark.asyncio
async def test_error_line_in_the_stream_is_a_server_error(router: respx.MockRouter) -> None:
    body = partial({"content": "Hel"}) + line({"error": "model runner has unexpectedly stopped"})
    router.post(ENDPOINT).mock(return_value=httpx.Response(200, content=body.encode()))
    with pytest.raises(ServerError, match="unexpectedly stopped"):
        async for _ in ollama().stream(simple_request()):
            pass


@pytest.mark.asyncio
async def test_error_in_a_200_body(router: respx.MockRouter) -> None:
    router.post(ENDPOINT).mock(return_value=httpx.Response(200, json={"error": "out of memory"}))
    with pytest.raises(ServerError, match="out of memory"):
        await ollama().complete(simple_request())


@pytest.mark.asyncio
async def test_a_line_that_is_not_an_object_breaks_the_stream(router: respx.MockRouter) -> None:
    router.post(ENDPOINT).mock(return_value=httpx.Response(200, content=b'\n"just a string"\n'))
    with pytest.raises(StreamError, match="unreadable"):
        async for _ in ollama().stream(simple_request()):
            pass


@pytest.mark.asyncio
async def test_streamed_calls_without_ids_get_ids_and_string_arguments_parse(
    router: respx.MockRouter,
) -> None:
    body = partial(
        {"content": "", "tool_calls": [{"function": {"name": "a", "arguments": {"x": 1}}}]}
    )
    body += partial(
        {"content": "", "tool_calls": [{"function": {"name": "b", "arguments": '{"y": 2}'}}]}
    )
    body += partial(
        {"content": "", "tool_calls": [{"function": {"name": "c", "arguments": "{oops"}}]}
    )
    body += line(final(Usage(input_tokens=3, output_tokens=4), done_reason="stop"))
    router.post(ENDPOINT).mock(return_value=httpx.Response(200, content=body.encode()))
    events = [e async for e in ollama().stream(simple_request())]
    deltas = [e for e in events if isinstance(e, StreamToolCallDelta)]
    assert [d.index for d in deltas] == [0, 1, 2]
    end = events[-1]
    assert isinstance(end, StreamEnd)
    calls = end.response.message.tool_calls
    assert [c.arguments for c in calls] == [{"x": 1}, {"y": 2}, {RAW_ARGUMENTS_KEY: "{oops"}]
    assert all(c.id.startswith("call_") for c in calls)
    assert len({c.id for c in calls}) == 3
    assert end.response.finish_reason == "tool_calls"
    assert end.response.usage == Usage(input_tokens=3, output_tokens=4)


@pytest.mark.asyncio
async def test_length_finish_and_missing_counts(router: respx.MockRouter) -> None:
    body = {
        "model": MODEL,
        "message": {"role": "assistant", "content": "truncat"},
        "done": True,
        "done_reason": "length",
    }
    router.post(ENDPOINT).mock(return_value=httpx.Response(200, json=body))
    response = await ollama().complete(simple_request())
    assert response.finish_reason == "length"
    assert response.usage == Usage()
    assert response.request_id is None


def test_plain_messages_and_defaults() -> None:
    provider = OllamaProvider()
    assert provider.model == "qwen2.5:7b"
    assert repr(provider) == "OllamaProvider(model='qwen2.5:7b', base_url='http://127.0.0.1:11434')"
    payload = provider.build_payload(
        simple_request(system="", messages=[Message.user("hi"), Message.assistant("hello")]),
        stream=False,
    )
    assert payload["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    assert "authorization" not in provider._http._headers


@pytest.mark.parametrize(
    ("response", "message"),
    [
        # What Ollama answers when the base URL wrongly ends in /v1.
        (httpx.Response(404, text="404 page not found"), "404 page not found"),
        (httpx.Response(500, json={"detail": "?"}), "HTTP 500"),
        (httpx.Response(500, text=""), "HTTP 500"),
    ],
)
@pytest.mark.asyncio
async def test_error_bodies_that_are_not_ollama_errors(
    router: respx.MockRouter, response: httpx.Response, message: str
) -> None:
    router.post(ENDPOINT).mock(return_value=response)
    with pytest.raises(ProviderError, match=message):
        await ollama().complete(simple_request())
