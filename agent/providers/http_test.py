from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
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
from agent.providers.http import (
    HttpChannel,
    ModelDeadlines,
    ServerSentEvent,
    error_class_for_status,
    error_for_status,
    error_for_transport,
    iter_ndjson,
    iter_sse,
    truncate,
)

SECRET = "sk-http-test-SECRET-987654321"


async def lines(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


@pytest.mark.asyncio
async def test_iter_sse_reads_events_comments_and_multiline_data() -> None:
    events = [
        e
        async for e in iter_sse(
            lines(
                ": keep-alive",
                "event: message_start",
                'data: {"a": 1}',
                "",
                "",
                "data: first",
                "data:second",
                "id: 7",
                "",
                "event: ping",
                "",
                "data: [DONE]",
            )
        )
    ]
    assert events == [
        ServerSentEvent("message_start", '{"a": 1}'),
        ServerSentEvent("message", "first\nsecond"),
        ServerSentEvent("message", "[DONE]"),  # the last event, with no blank line after it
    ]


@pytest.mark.asyncio
async def test_iter_ndjson_skips_blank_lines_and_rejects_garbage() -> None:
    assert [
        x async for x in iter_ndjson(lines('{"a": 1}', "", "  ", '{"b": 2}'), provider="p")
    ] == [
        {"a": 1},
        {"b": 2},
    ]
    with pytest.raises(StreamError, match="unreadable"):
        [x async for x in iter_ndjson(lines("{nope"), provider="p")]
    with pytest.raises(StreamError, match="unreadable"):
        [x async for x in iter_ndjson(lines("[1]"), provider="p")]


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, ValidationError),
        (413, ValidationError),
        (422, ValidationError),
        (401, AuthenticationError),
        (403, AuthenticationError),
        (404, NotFoundError),
        (408, ServerError),
        (409, ServerError),
        (429, RateLimitError),
        (500, ServerError),
        (529, ServerError),
        (418, ProviderError),
    ],
)
def test_error_class_for_status(status: int, cls: type[ProviderError]) -> None:
    assert error_class_for_status(status) is cls


def test_error_for_status_redacts_and_truncates() -> None:
    error = error_for_status(
        429,
        provider="p",
        message=f"bad {SECRET}",
        body=SECRET + "x" * 5000,
        request_id="r1",
        retry_after=2.0,
        secrets=[SECRET, None],
    )
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 2.0
    assert SECRET not in str(error) and SECRET not in (error.body or "")
    assert error.body is not None and error.body.startswith("[REDACTED]")
    assert "more characters" in error.body
    assert str(error) == "p: bad [REDACTED] | status 429 | request id r1"


def test_truncate_leaves_short_text_alone() -> None:
    assert truncate("short") == "short"
    assert truncate("abcdef", 3) == "abc... [3 more characters]"


@pytest.mark.parametrize(
    ("exc", "during_stream", "cls"),
    [
        (httpx.ConnectTimeout("slow"), False, ProviderTimeoutError),
        (httpx.ReadTimeout("slow"), True, ProviderTimeoutError),
        (httpx.ConnectError("refused"), False, NetworkError),
        (httpx.RemoteProtocolError("peer closed"), True, StreamError),
        (httpx.ReadError(""), False, NetworkError),
    ],
)
def test_error_for_transport(
    exc: httpx.HTTPError, during_stream: bool, cls: type[ProviderError]
) -> None:
    error = error_for_transport(
        exc, provider="p", url="http://x.test", during_stream=during_stream, hint="try again"
    )
    assert type(error) is cls
    assert error.provider == "p"
    if cls is NetworkError:
        assert str(error).endswith("; try again")


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        yield router


def channel(client: httpx.AsyncClient | None = None) -> HttpChannel:
    return HttpChannel(
        provider="p",
        base_url="http://api.test/v1/",
        timeout=5.0,
        headers={"Authorization": f"Bearer {SECRET}"},
        translate_error=lambda r: error_for_status(r.status_code, provider="p", message="failed"),
        client=client,
        secrets=[SECRET],
    )


@pytest.mark.asyncio
async def test_channel_joins_urls_and_sends_headers(router: respx.MockRouter) -> None:
    route = router.get("http://api.test/v1/models").mock(
        return_value=httpx.Response(200, json={"ok": True})
    )
    http = channel()
    assert http.url("/models") == http.url("models") == "http://api.test/v1/models"
    data, response = await http.request_json("GET", "/models")
    assert data == {"ok": True} and response.status_code == 200
    assert route.calls.last.request.headers["authorization"] == f"Bearer {SECRET}"
    await http.aclose()
    assert http._client.is_closed


@pytest.mark.asyncio
async def test_an_injected_client_is_left_open(router: respx.MockRouter) -> None:
    async with httpx.AsyncClient() as client:
        http = channel(client)
        await http.aclose()
        assert not client.is_closed


@pytest.mark.asyncio
async def test_error_body_that_breaks_while_reading_is_a_network_error(
    router: respx.MockRouter,
) -> None:
    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b'{"error"'
            raise httpx.ReadError("reset")

    router.post("http://api.test/v1/chat").mock(return_value=httpx.Response(500, stream=Broken()))
    with pytest.raises(NetworkError):
        async with channel().stream("/chat", {}):
            pass


@pytest.mark.asyncio
async def test_non_json_success_is_a_server_error_with_redacted_body(
    router: respx.MockRouter,
) -> None:
    router.post("http://api.test/v1/chat").mock(
        return_value=httpx.Response(200, text=f"echo {SECRET}")
    )
    with pytest.raises(ServerError) as caught:
        await channel().request_json("POST", "/chat", {})
    assert caught.value.body == "echo [REDACTED]"


# ---- deadlines: a real socket server that misbehaves -----------------------------------------


async def _misbehaving_server(behaviour: str) -> tuple[asyncio.AbstractServer, str]:
    """`black-hole`: accepts, never answers; `stall`: headers and one chunk, then nothing;
    `trickle`: a chunk every 0.1 s for ever."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        try:
            if behaviour == "black-hole":
                await asyncio.sleep(60)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            writer.write(b"6\r\ndata: \r\n")
            await writer.drain()
            while behaviour == "trickle":
                await asyncio.sleep(0.1)
                writer.write(b"1\r\n:\r\n")
                await writer.drain()
            await asyncio.sleep(60)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


def _channel(base_url: str, deadlines: ModelDeadlines) -> HttpChannel:
    return HttpChannel(
        provider="p",
        base_url=base_url,
        timeout=deadlines,
        headers={},
        translate_error=lambda response: ProviderError("unexpected", provider="p"),
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("behaviour", "deadline", "setting"),
    [
        ("black-hole", "first-byte", "DETECTIVE_MODEL_FIRST_BYTE_TIMEOUT"),
        ("stall", "idle", "DETECTIVE_MODEL_IDLE_TIMEOUT"),
        ("trickle", "total", "DETECTIVE_MODEL_CALL_TIMEOUT"),
    ],
)
async def test_each_deadline_ends_a_stream_and_says_which(
    behaviour: str, deadline: str, setting: str
) -> None:
    server, base_url = await _misbehaving_server(behaviour)
    channel = _channel(base_url, ModelDeadlines(connect=1, first_byte=0.4, idle=0.4, total=1.2))
    started = asyncio.get_running_loop().time()
    try:
        with pytest.raises(ProviderTimeoutError) as caught:
            async with channel.stream("/chat", {"x": 1}) as response:
                async for _ in response.aiter_lines():
                    pass
    finally:
        await channel.aclose()
        server.close()
    elapsed = asyncio.get_running_loop().time() - started
    assert f"the {deadline} deadline; {setting} changes it" in str(caught.value)
    assert elapsed < 3


@pytest.mark.asyncio
async def test_a_plain_request_has_the_first_byte_deadline_too() -> None:
    server, base_url = await _misbehaving_server("black-hole")
    channel = _channel(base_url, ModelDeadlines(first_byte=0.3, total=5))
    try:
        with pytest.raises(ProviderTimeoutError, match=r"sent no first byte within 0\.3 s"):
            await channel.request_json("POST", "/chat", {"x": 1})
    finally:
        await channel.aclose()
        server.close()


def test_a_plain_number_keeps_the_old_single_timeout() -> None:
    deadlines = ModelDeadlines.from_seconds(120)
    assert (deadlines.first_byte, deadlines.idle, deadlines.total) == (120, 120, None)
