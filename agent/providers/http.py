"""The httpx plumbing the adapters share.

- `HttpChannel`: one `httpx.AsyncClient` (injected or owned), JSON posts and streamed
  posts, with every failure leaving as an `agent.errors` error.
- `iter_sse` / `iter_ndjson`: the two streaming body formats (Anthropic and
  OpenAI-compatible servers speak Server-Sent Events, Ollama newline-delimited JSON).
- `error_for_status` / `error_for_transport`: the mapping from HTTP statuses and httpx
  exceptions to the error tree. Each adapter reads its own error body format in one
  function and hands the pieces to `error_for_status`.
- `ModelDeadlines`: how long one model call may take: to connect, to its first byte, between
  two chunks of a stream, and in all. Each ends the call with a `ProviderTimeoutError` that
  says which deadline passed and the setting that changes it.

API keys travel only in request headers, never in URLs; every message and body put on an
error is passed through `redact` as a belt-and-braces.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

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
    redact,
)
from agent.retry import parse_retry_after
from agent.tls import async_client

MAX_ERROR_BODY_CHARS = 2048


@dataclass(frozen=True)
class ModelDeadlines:
    """Seconds one model call may take; `total` None means no limit on the whole call.

    A server that accepts a connection and never answers is caught by `first_byte`, one that
    stalls in the middle of a stream by `idle`, one that trickles for ever by `total`.
    """

    connect: float = 10.0
    first_byte: float = 30.0
    idle: float = 30.0
    total: float | None = 300.0

    @classmethod
    def from_seconds(cls, seconds: float) -> ModelDeadlines:
        """One timeout for every step, no limit in all (an adapter given a plain number)."""
        return cls(connect=seconds, first_byte=seconds, idle=seconds, total=None)

    def httpx_timeout(self) -> httpx.Timeout:
        # httpx's read timeout is the longest wait for any chunk: the idle gap. The first
        # byte has a deadline of its own around the send.
        return httpx.Timeout(self.idle, connect=self.connect, pool=self.connect)


DEADLINE_SETTINGS = {
    "connect": "DETECTIVE_MODEL_CONNECT_TIMEOUT",
    "first_byte": "DETECTIVE_MODEL_FIRST_BYTE_TIMEOUT",
    "idle": "DETECTIVE_MODEL_IDLE_TIMEOUT",
    "total": "DETECTIVE_MODEL_CALL_TIMEOUT",
}


def deadline_error(provider: str, url: str, which: str, seconds: float) -> ProviderTimeoutError:
    what = {
        "connect": f"could not connect to {url} within {seconds:g} s",
        "first_byte": f"sent no first byte within {seconds:g} s of the request to {url}",
        "idle": f"sent nothing for {seconds:g} s in the middle of its answer from {url}",
        "total": f"did not finish its answer from {url} within {seconds:g} s",
    }[which]
    label = which.replace("_", "-")
    return ProviderTimeoutError(
        f"{provider}: the model {what} (the {label} deadline; {DEADLINE_SETTINGS[which]} "
        "changes it)",
        provider=provider,
    )


def truncate(text: str, limit: int = MAX_ERROR_BODY_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit} more characters]"


def error_class_for_status(status: int) -> type[ProviderError]:
    if status in (400, 413, 422):
        return ValidationError
    if status in (401, 403):
        return AuthenticationError
    if status == 404:
        return NotFoundError
    if status == 429:
        return RateLimitError
    if status in (408, 409) or status >= 500:
        return ServerError
    return ProviderError


def error_for_status(
    status: int,
    *,
    provider: str,
    message: str,
    body: str | None = None,
    request_id: str | None = None,
    retry_after: float | None = None,
    secrets: Iterable[str | None] = (),
) -> ProviderError:
    """The error for an HTTP status (or the status a provider's error type stands for)."""
    secrets = list(secrets)
    cls = error_class_for_status(status)
    text = redact(f"{provider}: {message}", secrets)
    fields: dict[str, Any] = {
        "provider": provider,
        "status_code": status,
        "body": redact(truncate(body), secrets) if body is not None else None,
        "request_id": request_id,
    }
    if cls is RateLimitError or cls is ServerError:
        return cls(text, retry_after=retry_after, **fields)  # type: ignore[call-arg]
    return cls(text, **fields)


def error_from_response(
    response: httpx.Response,
    *,
    provider: str,
    message: str,
    request_id: str | None,
    secrets: Iterable[str | None] = (),
) -> ProviderError:
    """`error_for_status` for a read error response: its body, and the server's
    retry-after."""
    return error_for_status(
        response.status_code,
        provider=provider,
        message=message,
        body=response.text,
        request_id=request_id,
        retry_after=parse_retry_after(response.headers),
        secrets=secrets,
    )


def error_for_transport(
    exc: httpx.HTTPError,
    *,
    provider: str,
    url: str,
    during_stream: bool = False,
    hint: str = "",
    secrets: Iterable[str | None] = (),
) -> ProviderError:
    """The error for a request that got no (complete) HTTP response."""
    secrets = list(secrets)
    detail = redact(str(exc) or type(exc).__name__, secrets)
    if isinstance(exc, httpx.TimeoutException):
        return ProviderTimeoutError(
            f"{provider}: request to {url} timed out ({type(exc).__name__})",
            provider=provider,
        )
    if during_stream:
        return StreamError(
            f"{provider}: the stream was cut off midway ({detail})", provider=provider
        )
    message = f"{provider}: could not reach {url} ({detail})"
    return NetworkError(message + (f"; {hint}" if hint else ""), provider=provider)


def decode_object(text: str, *, provider: str) -> dict[str, Any]:
    """Parse one JSON object of a stream; anything else breaks the stream."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise StreamError(
            f"{provider}: unreadable data in the stream: {truncate(text, 200)!r}",
            provider=provider,
        )
    return value


@dataclass(frozen=True)
class ServerSentEvent:
    event: str
    data: str


class SseParser:
    """Server-Sent Events from the lines of a body, one line at a time: `event:` and
    `data:` fields, a blank line ends an event, `:` starts a comment (OpenRouter sends
    keep-alive comments). Fed by the reader's own loop: a generator in between was one more
    layer for every streamed chunk."""

    __slots__ = ("_data", "_event")

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> ServerSentEvent | None:
        """The event this line ends, if it ends one."""
        if not line:
            data = self._data
            event = self._event
            self._event, self._data = "", []
            return ServerSentEvent(event or "message", "\n".join(data)) if data else None
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None

    def end(self) -> ServerSentEvent | None:
        """The last event, when the body ended without its blank line."""
        data, self._data = self._data, []
        return ServerSentEvent(self._event or "message", "\n".join(data)) if data else None


async def iter_sse(lines: AsyncIterable[str]) -> AsyncIterator[ServerSentEvent]:
    """Server-Sent Events from the lines of a body (see `SseParser`)."""
    parser = SseParser()
    async for line in lines:
        sse = parser.feed(line)
        if sse is not None:
            yield sse
    last = parser.end()
    if last is not None:
        yield last


async def iter_ndjson(lines: AsyncIterable[str], *, provider: str) -> AsyncIterator[dict[str, Any]]:
    async for line in lines:
        if line.strip():
            yield decode_object(line, provider=provider)


ErrorTranslator = Callable[[httpx.Response], ProviderError]


class HttpChannel:
    """An adapter's connection to its API."""

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        timeout: float | ModelDeadlines,
        headers: Mapping[str, str],
        translate_error: ErrorTranslator,
        client: httpx.AsyncClient | None = None,
        secrets: Iterable[str | None] = (),
        unreachable_hint: str = "",
    ) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.deadlines = (
            timeout
            if isinstance(timeout, ModelDeadlines)
            else ModelDeadlines.from_seconds(float(timeout))
        )
        self._timeout = self.deadlines.httpx_timeout()
        # Sent with each request rather than set on the client, so an injected client
        # shared with other code never carries this adapter's key.
        self._headers = dict(headers)
        self._translate_error = translate_error
        self._owns_client = client is None
        self._client = client if client is not None else async_client()
        self._secrets = [s for s in secrets if s]
        self._hint = unreachable_hint

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def _transport_error(
        self, exc: httpx.HTTPError, url: str, *, during_stream: bool = False
    ) -> ProviderError:
        if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
            return deadline_error(self.provider, url, "connect", self.deadlines.connect)
        if isinstance(exc, httpx.ReadTimeout):
            return deadline_error(self.provider, url, "idle", self.deadlines.idle)
        return error_for_transport(
            exc,
            provider=self.provider,
            url=url,
            during_stream=during_stream,
            hint=self._hint,
            secrets=self._secrets,
        )

    async def _send(self, request: httpx.Request, url: str) -> httpx.Response:
        """Send, and wait for the response's start at most the first-byte deadline."""
        try:
            # asyncio.timeout, not wait_for: wait_for runs the send in a task of its own, one
            # more task and loop turn per model call.
            async with asyncio.timeout(self.deadlines.first_byte):
                return await self._client.send(request, stream=True)
        except TimeoutError:
            raise deadline_error(
                self.provider, url, "first_byte", self.deadlines.first_byte
            ) from None
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, url) from exc

    async def request_json(
        self, method: str, path: str, payload: Any | None = None
    ) -> tuple[Any, httpx.Response]:
        """Send one request and return its decoded JSON body and the response."""
        url = self.url(path)
        request = self._client.build_request(
            method, url, json=payload, headers=self._headers, timeout=self._timeout
        )
        # The whole call's deadline, inline: a context manager of our own around it was
        # one more generator and frame pair per model call.
        total = self.deadlines.total
        try:
            async with asyncio.timeout(total):
                response = await self._send(request, url)
                try:
                    await response.aread()
                except httpx.HTTPError as exc:
                    raise self._transport_error(exc, url) from exc
                finally:
                    await response.aclose()
        except TimeoutError:
            raise deadline_error(self.provider, url, "total", total or 0.0) from None
        if response.status_code >= 400:
            raise self._translate_error(response)
        try:
            return response.json(), response
        except ValueError:
            raise ServerError(
                f"{self.provider}: the response was not JSON",
                provider=self.provider,
                status_code=response.status_code,
                body=redact(truncate(response.text), self._secrets),
                request_id=None,
            ) from None

    @asynccontextmanager
    async def stream(self, path: str, payload: Any) -> AsyncIterator[httpx.Response]:
        """POST and yield the response with its body still unread. Errors raised while
        the caller reads the body come out translated too."""
        url = self.url(path)
        request = self._client.build_request(
            "POST", url, json=payload, headers=self._headers, timeout=self._timeout
        )
        # The whole call's deadline, around the caller's reading of the stream too (it runs
        # in the same task); inline, as in request_json.
        total = self.deadlines.total
        try:
            async with asyncio.timeout(total):
                response = await self._send(request, url)
                try:
                    if response.status_code >= 400:
                        try:
                            await response.aread()
                        except httpx.HTTPError as exc:
                            raise self._transport_error(exc, url) from exc
                        raise self._translate_error(response)
                    try:
                        yield response
                    except httpx.HTTPError as exc:
                        raise self._transport_error(exc, url, during_stream=True) from exc
                finally:
                    await response.aclose()
        except TimeoutError:
            raise deadline_error(self.provider, url, "total", total or 0.0) from None

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()
