"""The provider contract: the tests every adapter must pass, written once.

`ProviderContract` is a mixin (its name does not start with "Test", so pytest does not
run it on its own). Each adapter's test module subclasses it and supplies respx answers
in THAT provider's wire format, shaped after its published API reference; the tests
here only speak our own types. Adding a provider means writing those few builders.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

import httpx
import pytest
import pytest_asyncio
import respx

from agent.errors import (
    AuthenticationError,
    NetworkError,
    NotFoundError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamError,
    ValidationError,
)
from agent.messages import Message, ToolCall, ToolDefinition, Usage
from agent.providers.protocol import (
    ModelRequest,
    Provider,
    StreamEnd,
    StreamEvent,
    StreamTextDelta,
    StreamToolCallDelta,
)

API_KEY = "sk-contract-test-SECRET-0123456789abcdef"
REQUEST_ID = "req_contract_0001"

SYSTEM = "You assess software releases."
SUMMARY_TOOL = ToolDefinition(
    name="get_release_summary",
    description="Fetch the summary of a release.",
    parameters={
        "type": "object",
        "properties": {"release_id": {"type": "string"}},
        "required": ["release_id"],
    },
)
TESTS_TOOL = ToolDefinition(
    name="get_test_details",
    description="Fetch the test results of one suite.",
    parameters={
        "type": "object",
        "properties": {"release_id": {"type": "string"}, "suite": {"type": "string"}},
        "required": ["release_id", "suite"],
    },
)

# A conversation with two tool calls whose results were appended out of order, the
# first of them a failure: each adapter checks its exact wire translation of it.
CONVERSATION = [
    Message.user("Assess release v2.4.0"),
    Message.assistant(
        "Fetching the data.",
        [
            ToolCall(id="call_1", name="get_release_summary", arguments={"release_id": "v2.4.0"}),
            ToolCall(
                id="call_2",
                name="get_test_details",
                arguments={"release_id": "v2.4.0", "suite": "api"},
            ),
        ],
    ),
    Message(
        role="tool",
        tool_call_id="call_2",
        name="get_test_details",
        content="3 of 120 tests failed",
    ),
    Message(
        role="tool",
        tool_call_id="call_1",
        name="get_release_summary",
        content="release service unavailable",
        is_error=True,
    ),
    Message.user("Go on."),
]

TOOL_CALL_ID = "call_abc123"
TOOL_ARGUMENTS = {"release_id": "v2.4.0", "verbose": True}
# The arguments as a model streams them: split mid-key, mid-value, mid-literal.
TOOL_ARGUMENT_FRAGMENTS = ['{"release_', 'id": "v2.', '4.0", "verbose": tr', "ue}"]

ERROR_STATUSES = [
    (400, ValidationError),
    (401, AuthenticationError),
    (403, AuthenticationError),
    (404, NotFoundError),
    (408, ServerError),
    (409, ServerError),
    (422, ValidationError),
    (429, RateLimitError),
    (500, ServerError),
    (502, ServerError),
    (503, ServerError),
]


def simple_request(**overrides: Any) -> ModelRequest:
    fields: dict[str, Any] = {
        "system": SYSTEM,
        "messages": [Message.user("Assess release v2.4.0")],
        "tools": [SUMMARY_TOOL],
        "max_tokens": 512,
    }
    fields.update(overrides)
    return ModelRequest(**fields)


class BrokenStream(httpx.AsyncByteStream):
    """A body that starts well and then loses its connection."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        raise httpx.ReadError("connection reset by peer")


class ProviderContract:
    """Tests every Provider adapter passes. Subclasses supply the hooks below."""

    # --- what each adapter's test supplies ------------------------------------------
    provider_name: ClassVar[str]
    endpoint: ClassVar[str]  # the URL respx answers for a model call
    stream_content_type: ClassVar[str]
    request_id_header: ClassVar[str | None]  # None: the API has no request ids
    reports_cached_tokens: ClassVar[bool] = True
    # The provider's id of a reply, as the doubles send it (None: the API gives none).
    response_id: ClassVar[str | None] = None
    extra_error_statuses: ClassVar[list[tuple[int, type[ProviderError]]]] = []

    def make_provider(self, client: httpx.AsyncClient, **options: Any) -> Provider:
        raise NotImplementedError

    def text_response(self, text: str, usage: Usage) -> dict[str, Any]:
        """A non-streaming JSON body with a plain text reply."""
        raise NotImplementedError

    def tool_call_response(self, call: ToolCall, usage: Usage) -> dict[str, Any]:
        """A non-streaming JSON body whose reply is one tool call."""
        raise NotImplementedError

    def text_stream(self, pieces: list[str], usage: Usage) -> bytes:
        raise NotImplementedError

    def tool_call_stream(
        self, text: str, call_id: str, name: str, fragments: list[str], usage: Usage
    ) -> bytes:
        """Some text, then one tool call whose arguments arrive in `fragments` (as far
        as the API splits arguments at all)."""
        raise NotImplementedError

    def cut_off_stream(self) -> bytes:
        """A stream that sends some text and ends before its terminator."""
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def assert_conversation_payload(self, payload: dict[str, Any]) -> None:
        """Check the exact wire translation of SYSTEM + CONVERSATION + both tools."""
        raise NotImplementedError

    def assert_auth_headers(self, headers: httpx.Headers) -> None:
        raise NotImplementedError

    # --- fixtures -------------------------------------------------------------------
    @pytest_asyncio.fixture
    async def client(self) -> AsyncIterator[httpx.AsyncClient]:
        async with httpx.AsyncClient() as client:
            yield client

    @pytest.fixture
    def router(self) -> Iterator[respx.MockRouter]:
        with respx.mock(assert_all_called=False) as router:
            yield router

    @pytest_asyncio.fixture
    async def provider(self, client: httpx.AsyncClient) -> AsyncIterator[Provider]:
        provider = self.make_provider(client)
        yield provider
        await provider.aclose()

    # --- helpers --------------------------------------------------------------------
    def headers(self, **extra: str) -> dict[str, str]:
        headers = dict(extra)
        if self.request_id_header:
            headers[self.request_id_header] = REQUEST_ID
        return headers

    def answer_json(
        self, router: respx.MockRouter, body: dict[str, Any], status: int = 200, **headers: str
    ) -> respx.Route:
        return router.post(self.endpoint).mock(
            return_value=httpx.Response(status, json=body, headers=self.headers(**headers))
        )

    def answer_stream(self, router: respx.MockRouter, body: bytes) -> respx.Route:
        return router.post(self.endpoint).mock(
            return_value=httpx.Response(
                200,
                content=body,
                headers=self.headers(**{"content-type": self.stream_content_type}),
            )
        )

    def expected_request_id(self) -> str | None:
        return REQUEST_ID if self.request_id_header else None

    @staticmethod
    async def collect(provider: Provider, request: ModelRequest) -> list[StreamEvent]:
        return [event async for event in provider.stream(request)]

    def assert_usage(self, actual: Usage, expected: Usage) -> None:
        assert actual.input_tokens == expected.input_tokens
        assert actual.output_tokens == expected.output_tokens
        if self.reports_cached_tokens:
            assert actual.cached_input_tokens == expected.cached_input_tokens

    # --- the contract ---------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_implements_the_provider_protocol(self, provider: Provider) -> None:
        assert isinstance(provider, Provider)
        assert provider.name == self.provider_name
        assert provider.model
        capabilities = provider.capabilities()
        assert capabilities.tools and capabilities.streaming
        assert capabilities.context_window > capabilities.max_output_tokens > 0
        assert provider.estimate_tokens([Message.user("x" * 400)], system="abcd") > 100

    @pytest.mark.asyncio
    async def test_context_window_can_be_overridden(self, client: httpx.AsyncClient) -> None:
        provider = self.make_provider(client, context_window=12_345, max_output_tokens=678)
        assert provider.capabilities().context_window == 12_345
        assert provider.capabilities().max_output_tokens == 678

    @pytest.mark.asyncio
    async def test_complete_plain_text(self, provider: Provider, router: respx.MockRouter) -> None:
        usage = Usage(input_tokens=21, output_tokens=5, cached_input_tokens=8)
        self.answer_json(router, self.text_response("The release looks safe.", usage))
        response = await provider.complete(simple_request())
        assert response.message.role == "assistant"
        assert response.message.content == "The release looks safe."
        assert response.message.tool_calls == []
        assert response.finish_reason == "stop"
        assert response.model
        assert response.request_id == self.expected_request_id()
        assert response.message.metadata.get("response_id") == self.response_id
        self.assert_usage(response.usage, usage)

    @pytest.mark.asyncio
    async def test_complete_tool_call(self, provider: Provider, router: respx.MockRouter) -> None:
        call = ToolCall(id=TOOL_CALL_ID, name="get_release_summary", arguments=TOOL_ARGUMENTS)
        usage = Usage(input_tokens=40, output_tokens=12, cached_input_tokens=0)
        self.answer_json(router, self.tool_call_response(call, usage))
        response = await provider.complete(simple_request())
        assert response.finish_reason == "tool_calls"
        [received] = response.message.tool_calls
        assert received.name == "get_release_summary"
        assert received.arguments == TOOL_ARGUMENTS
        assert received.id
        self.assert_usage(response.usage, usage)

    @pytest.mark.asyncio
    async def test_stream_plain_text(self, provider: Provider, router: respx.MockRouter) -> None:
        usage = Usage(input_tokens=30, output_tokens=9, cached_input_tokens=12)
        pieces = ["The ", "release ", "looks ", "safe."]
        self.answer_stream(router, self.text_stream(pieces, usage))
        events = await self.collect(provider, simple_request())
        deltas = [e for e in events if isinstance(e, StreamTextDelta)]
        assert "".join(d.text for d in deltas) == "The release looks safe."
        assert len(deltas) >= len(pieces)
        assert [type(e) for e in events].count(StreamEnd) == 1
        end = events[-1]
        assert isinstance(end, StreamEnd)
        assert end.response.message.content == "The release looks safe."
        assert end.response.message.tool_calls == []
        assert end.response.finish_reason == "stop"
        assert end.response.model
        assert end.response.request_id == self.expected_request_id()
        assert end.response.message.metadata.get("response_id") == self.response_id

    @pytest.mark.asyncio
    async def test_stream_reports_usage(self, provider: Provider, router: respx.MockRouter) -> None:
        usage = Usage(input_tokens=1234, output_tokens=56, cached_input_tokens=1000)
        self.answer_stream(router, self.text_stream(["ok"], usage))
        events = await self.collect(provider, simple_request())
        end = events[-1]
        assert isinstance(end, StreamEnd)
        self.assert_usage(end.response.usage, usage)

    @pytest.mark.asyncio
    async def test_stream_tool_call_arguments_split_across_chunks(
        self, provider: Provider, router: respx.MockRouter
    ) -> None:
        usage = Usage(input_tokens=50, output_tokens=20, cached_input_tokens=0)
        body = self.tool_call_stream(
            "Let me look.", TOOL_CALL_ID, "get_release_summary", TOOL_ARGUMENT_FRAGMENTS, usage
        )
        self.answer_stream(router, body)
        events = await self.collect(provider, simple_request())

        text = "".join(e.text for e in events if isinstance(e, StreamTextDelta))
        assert text == "Let me look."
        tool_deltas = [e for e in events if isinstance(e, StreamToolCallDelta)]
        assert tool_deltas and {d.index for d in tool_deltas} == {0}
        assert tool_deltas[0].name == "get_release_summary"
        assert [d.id for d in tool_deltas if d.id] == [TOOL_CALL_ID]
        streamed = "".join(d.arguments_fragment for d in tool_deltas)
        assert json.loads(streamed) == TOOL_ARGUMENTS

        end = events[-1]
        assert isinstance(end, StreamEnd)
        assert end.response.finish_reason == "tool_calls"
        assert end.response.message.content == "Let me look."
        assert end.response.message.tool_calls == [
            ToolCall(
                id=TOOL_CALL_ID,
                name="get_release_summary",
                arguments=TOOL_ARGUMENTS,
                timestamp=end.response.message.tool_calls[0].timestamp,
            )
        ]
        self.assert_usage(end.response.usage, usage)

    @pytest.mark.parametrize(("status", "error_class"), ERROR_STATUSES)
    @pytest.mark.asyncio
    async def test_error_status_maps_to_error_class(
        self,
        provider: Provider,
        router: respx.MockRouter,
        status: int,
        error_class: type[ProviderError],
    ) -> None:
        self.answer_json(router, self.error_body(status, "something went wrong"), status)
        with pytest.raises(error_class) as caught:
            await provider.complete(simple_request())
        self.assert_error_details(caught.value, status)

    @pytest.mark.parametrize(("status", "error_class"), ERROR_STATUSES)
    @pytest.mark.asyncio
    async def test_error_status_maps_to_error_class_when_streaming(
        self,
        provider: Provider,
        router: respx.MockRouter,
        status: int,
        error_class: type[ProviderError],
    ) -> None:
        self.answer_json(router, self.error_body(status, "something went wrong"), status)
        with pytest.raises(error_class) as caught:
            await self.collect(provider, simple_request())
        self.assert_error_details(caught.value, status)

    @pytest.mark.asyncio
    async def test_provider_specific_error_statuses(
        self, provider: Provider, router: respx.MockRouter
    ) -> None:
        for status, error_class in self.extra_error_statuses:
            self.answer_json(router, self.error_body(status, "provider trouble"), status)
            with pytest.raises(error_class) as caught:
                await provider.complete(simple_request())
            self.assert_error_details(caught.value, status, "provider trouble")

    def assert_error_details(
        self, error: ProviderError, status: int, message: str = "something went wrong"
    ) -> None:
        assert error.status_code == status
        assert error.provider == self.provider_name
        assert error.request_id == self.expected_request_id()
        assert error.body is not None and message in error.body
        assert message in str(error)

    @pytest.mark.parametrize(
        ("headers", "expected"),
        [({"retry-after-ms": "1500"}, 1.5), ({"Retry-After": "7"}, 7.0), ({}, None)],
    )
    @pytest.mark.asyncio
    async def test_rate_limit_carries_retry_after(
        self,
        provider: Provider,
        router: respx.MockRouter,
        headers: dict[str, str],
        expected: float | None,
    ) -> None:
        self.answer_json(router, self.error_body(429, "rate limited"), 429, **headers)
        with pytest.raises(RateLimitError) as caught:
            await provider.complete(simple_request())
        assert caught.value.retry_after == expected

    @pytest.mark.asyncio
    async def test_unavailable_server_carries_retry_after(
        self, provider: Provider, router: respx.MockRouter
    ) -> None:
        self.answer_json(router, self.error_body(503, "busy"), 503, **{"Retry-After": "4"})
        with pytest.raises(ServerError) as caught:
            await provider.complete(simple_request())
        assert caught.value.retry_after == 4.0

    @pytest.mark.asyncio
    async def test_error_body_is_truncated(
        self, provider: Provider, router: respx.MockRouter
    ) -> None:
        self.answer_json(router, self.error_body(500, "x" * 10_000), 500)
        with pytest.raises(ServerError) as caught:
            await provider.complete(simple_request())
        assert caught.value.body is not None
        assert 2048 <= len(caught.value.body) < 2200

    @pytest.mark.parametrize("streaming", [False, True])
    @pytest.mark.asyncio
    async def test_timeout_becomes_provider_timeout_error(
        self, provider: Provider, router: respx.MockRouter, streaming: bool
    ) -> None:
        router.post(self.endpoint).mock(side_effect=httpx.ReadTimeout("timed out"))
        with pytest.raises(ProviderTimeoutError) as caught:
            if streaming:
                await self.collect(provider, simple_request())
            else:
                await provider.complete(simple_request())
        assert caught.value.provider == self.provider_name

    @pytest.mark.parametrize("streaming", [False, True])
    @pytest.mark.asyncio
    async def test_connection_refused_becomes_network_error(
        self, provider: Provider, router: respx.MockRouter, streaming: bool
    ) -> None:
        router.post(self.endpoint).mock(side_effect=httpx.ConnectError("Connection refused"))
        with pytest.raises(NetworkError) as caught:
            if streaming:
                await self.collect(provider, simple_request())
            else:
                await provider.complete(simple_request())
        assert not isinstance(caught.value, ProviderTimeoutError)
        assert "Connection refused" in str(caught.value)

    @pytest.mark.asyncio
    async def test_stream_cut_off_midway_raises_stream_error(
        self, provider: Provider, router: respx.MockRouter
    ) -> None:
        self.answer_stream(router, self.cut_off_stream())
        events: list[StreamEvent] = []
        with pytest.raises(StreamError):
            async for event in provider.stream(simple_request()):
                events.append(event)
        assert any(isinstance(e, StreamTextDelta) for e in events)
        assert not any(isinstance(e, StreamEnd) for e in events)

    @pytest.mark.asyncio
    async def test_stream_connection_lost_midway_raises_stream_error(
        self, provider: Provider, router: respx.MockRouter
    ) -> None:
        first_half = self.cut_off_stream()
        router.post(self.endpoint).mock(
            return_value=httpx.Response(
                200,
                stream=BrokenStream(first_half),
                headers=self.headers(**{"content-type": self.stream_content_type}),
            )
        )
        events: list[StreamEvent] = []
        with pytest.raises(StreamError, match="cut off"):
            async for event in provider.stream(simple_request()):
                events.append(event)
        assert not any(isinstance(e, StreamEnd) for e in events)

    @pytest.mark.parametrize("streaming", [False, True])
    @pytest.mark.asyncio
    async def test_api_key_never_appears_in_errors_or_repr(
        self, client: httpx.AsyncClient, router: respx.MockRouter, streaming: bool
    ) -> None:
        provider = self.make_provider(client)
        assert API_KEY not in repr(provider)
        # Some APIs echo the key they refused; it must not come back out of ours.
        self.answer_json(router, self.error_body(401, f"Incorrect API key: {API_KEY}"), 401)
        with pytest.raises(AuthenticationError) as caught:
            if streaming:
                await self.collect(provider, simple_request())
            else:
                await provider.complete(simple_request())
        error = caught.value
        for text in (str(error), repr(error), error.message, error.body or ""):
            assert API_KEY not in text
        assert "[REDACTED]" in (error.body or "")

    @pytest.mark.asyncio
    async def test_request_translates_a_conversation_with_tool_calls(
        self, provider: Provider, router: respx.MockRouter
    ) -> None:
        route = self.answer_json(
            router, self.text_response("ok", Usage(input_tokens=1, output_tokens=1))
        )
        request = ModelRequest(
            system=SYSTEM,
            messages=CONVERSATION,
            tools=[SUMMARY_TOOL, TESTS_TOOL],
            max_tokens=512,
            temperature=0.2,
        )
        await provider.complete(request)
        sent = route.calls.last.request
        self.assert_auth_headers(sent.headers)
        self.assert_conversation_payload(json.loads(sent.content))

    @pytest.mark.asyncio
    async def test_stream_sets_the_stream_flag(
        self, provider: Provider, router: respx.MockRouter
    ) -> None:
        route = self.answer_stream(router, self.text_stream(["ok"], Usage()))
        await self.collect(provider, simple_request())
        assert json.loads(route.calls.last.request.content)["stream"] is True
