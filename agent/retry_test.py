from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from agent.errors import (
    AuthenticationError,
    ConfigurationError,
    NetworkError,
    NotFoundError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamError,
    ValidationError,
)
from agent.messages import Message
from agent.providers.protocol import (
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderCapabilities,
    StreamEnd,
    StreamEvent,
    StreamRetry,
    StreamTextDelta,
    StreamToolCallDelta,
)
from agent.retry import (
    RetryingProvider,
    RetryPolicy,
    backoff_delay,
    listening_for_retries,
    parse_retry_after,
    should_retry,
)

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
REQUEST = ModelRequest(messages=[Message.user("hi")])
RESPONSE = ModelResponse(message=Message.assistant("hello"), finish_reason="stop")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RateLimitError("slow down", status_code=429), True),
        (ServerError("boom", status_code=500), True),
        (ServerError("timeout", status_code=408), True),
        (ServerError("conflict", status_code=409), True),
        (ServerError("overloaded", status_code=529), True),
        (NetworkError("refused"), True),
        (ProviderTimeoutError("slow"), True),
        (StreamError("cut off"), True),
        (ValidationError("bad", status_code=400), False),
        (AuthenticationError("key", status_code=401), False),
        (AuthenticationError("forbidden", status_code=403), False),
        (NotFoundError("model", status_code=404), False),
        (ConfigurationError("no key"), False),
        (ProviderError("odd", status_code=418), False),
        (ProviderError("odd", status_code=503), True),
        (ProviderError("odd", status_code=409), True),
        (ProviderError("no status"), False),
        (ValueError("not ours"), False),
    ],
)
def test_should_retry(error: BaseException, expected: bool) -> None:
    assert should_retry(error) is expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After-Ms": "250", "Retry-After": "9"}, 0.25),
        ({"retry-after": "7"}, 7.0),
        ({"Retry-After": "2.5"}, 2.5),
        ({"Retry-After": format_datetime(NOW + timedelta(seconds=30), usegmt=True)}, 30),
        ({"Retry-After": format_datetime(NOW - timedelta(seconds=30), usegmt=True)}, 0),
        ({"Retry-After": "Sun, 01 Jun 2025 12:00:10"}, 10),  # no zone: taken as UTC
        ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),
        ({"Retry-After": "-5"}, None),  # not a wait: the usual back-off applies
        ({"Retry-After": "whenever"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, NOW) == expected


def test_parse_retry_after_defaults_to_the_real_clock() -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    delay = parse_retry_after({"Retry-After": format_datetime(later, usegmt=True)})
    assert delay is not None and 3500 < delay <= 3600


@pytest.mark.parametrize(
    ("attempt", "random", "expected"),
    [
        (1, 0.0, 1.0),
        (2, 0.0, 2.0),
        (3, 0.0, 4.0),
        (1, 1.0, 1.25),  # up to 25% jitter on top
        (2, 0.5, 2.25),
        (7, 0.0, 60.0),  # 64s capped by max_delay
        (7, 1.0, 60.0),  # jitter never exceeds the cap
    ],
)
def test_backoff_delay_is_exponential_with_capped_jitter(
    attempt: int, random: float, expected: float
) -> None:
    assert backoff_delay(attempt, RetryPolicy(), lambda: random) == pytest.approx(expected)


def test_backoff_delay_without_jitter_ignores_random() -> None:
    policy = RetryPolicy(jitter=False, initial_delay=0.5, factor=3.0)
    assert backoff_delay(3, policy, lambda: 1.0) == pytest.approx(4.5)


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [(12.0, 12.0), (0.0, 0.0), (-1.0, 0.0), (600.0, 60.0)],
)
def test_server_retry_after_wins_but_is_capped(retry_after: float, expected: float) -> None:
    delay = backoff_delay(1, RetryPolicy(), lambda: 1.0, retry_after=retry_after)
    assert delay == expected


class ScriptedProvider:
    """A fake Provider: each call plays the next script entry. An entry is a list of
    stream events, optionally ending with an exception to raise."""

    def __init__(self, *script: list[StreamEvent | Exception] | Exception) -> None:
        self.script = list(script)
        self.calls = 0
        self.closed_streams = 0
        self.closed = False

    @property
    def name(self) -> str:
        return "scripted"

    @property
    def model(self) -> str:
        return "scripted-1"

    def _next(self) -> list[StreamEvent | Exception]:
        self.calls += 1
        entry = self.script.pop(0)
        return [entry] if isinstance(entry, Exception) else entry

    async def complete(self, request: ModelRequest) -> ModelResponse:
        for item in self._next():
            if isinstance(item, Exception):
                raise item
        return RESPONSE

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        try:
            for item in self._next():
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            self.closed_streams += 1

    def estimate_tokens(self, messages: Sequence[Message], system: str = "") -> int:
        return 42

    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities(context_window=1234)

    async def aclose(self) -> None:
        self.closed = True


class FakeSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def retrying(
    inner: ScriptedProvider, **policy: float
) -> tuple[RetryingProvider, FakeSleep, list[StreamRetry]]:
    sleep = FakeSleep()
    seen: list[StreamRetry] = []
    provider = RetryingProvider(
        inner,
        RetryPolicy(**policy),  # type: ignore[arg-type]
        sleep=sleep,
        random=lambda: 0.0,
        on_retry=seen.append,
    )
    return provider, sleep, seen


END = StreamEnd(response=RESPONSE)


async def collect(provider: Provider) -> list[StreamEvent]:
    return [event async for event in provider.stream(REQUEST)]


def test_retrying_provider_is_a_provider_and_delegates() -> None:
    inner = ScriptedProvider()
    provider, _, _ = retrying(inner)
    assert isinstance(provider, Provider)
    assert provider.name == "scripted"
    assert provider.model == "scripted-1"
    assert provider.estimate_tokens([Message.user("x")]) == 42
    assert provider.capabilities().context_window == 1234
    assert repr(provider).startswith("RetryingProvider(")


@pytest.mark.asyncio
async def test_aclose_closes_the_inner_provider() -> None:
    inner = ScriptedProvider()
    provider, _, _ = retrying(inner)
    await provider.aclose()
    assert inner.closed


@pytest.mark.asyncio
async def test_complete_retries_retryable_errors_then_succeeds() -> None:
    inner = ScriptedProvider(ServerError("503", status_code=503), NetworkError("x"), [])
    provider, sleep, seen = retrying(inner)
    assert await provider.complete(REQUEST) == RESPONSE
    assert inner.calls == 3
    assert sleep.delays == [1.0, 2.0]
    assert [(r.attempt, r.error_type) for r in seen] == [
        (1, "ServerError"),
        (2, "NetworkError"),
    ]


@pytest.mark.asyncio
async def test_complete_honours_retry_after() -> None:
    inner = ScriptedProvider(RateLimitError("slow", retry_after=7.5), [])
    provider, sleep, _ = retrying(inner)
    await provider.complete(REQUEST)
    assert sleep.delays == [7.5]


@pytest.mark.parametrize(
    "error",
    [
        ValidationError("bad request", status_code=400),
        AuthenticationError("bad key", status_code=401),
        NotFoundError("no model", status_code=404),
    ],
)
@pytest.mark.asyncio
async def test_complete_fails_fast_on_permanent_errors(error: ProviderError) -> None:
    inner = ScriptedProvider(error, [])
    provider, sleep, seen = retrying(inner)
    with pytest.raises(type(error)):
        await provider.complete(REQUEST)
    assert inner.calls == 1
    assert sleep.delays == [] and seen == []


@pytest.mark.asyncio
async def test_complete_reraises_the_last_error_after_the_last_attempt() -> None:
    last = ServerError("third", status_code=500)
    inner = ScriptedProvider(ServerError("first"), NetworkError("second"), last)
    provider, sleep, _ = retrying(inner)
    with pytest.raises(ServerError) as caught:
        await provider.complete(REQUEST)
    assert caught.value is last
    assert inner.calls == 3
    assert len(sleep.delays) == 2


@pytest.mark.asyncio
async def test_an_async_retry_callback_is_awaited() -> None:
    seen: list[StreamRetry] = []

    async def on_retry(retry: StreamRetry) -> None:
        seen.append(retry)

    inner = ScriptedProvider(ServerError("x"), [])
    provider = RetryingProvider(inner, sleep=FakeSleep(), on_retry=on_retry)
    await provider.complete(REQUEST)
    assert len(seen) == 1


@pytest.mark.asyncio
async def test_stream_retry_after_partial_output_is_flagged_discarded() -> None:
    inner = ScriptedProvider(
        [StreamTextDelta(text="Hel"), StreamError("cut off")],
        [StreamTextDelta(text="Hello"), END],
    )
    provider, sleep, seen = retrying(inner)
    events = await collect(provider)
    assert events[0] == StreamTextDelta(text="Hel")
    retry = events[1]
    assert isinstance(retry, StreamRetry)
    assert retry.attempt == 1 and retry.max_attempts == 3
    assert retry.partial_discarded is True
    assert retry.error_type == "StreamError"
    assert "cut off" in retry.reason
    assert retry.delay_s == 1.0
    assert events[2:] == [StreamTextDelta(text="Hello"), END]
    assert sleep.delays == [1.0]
    assert seen == [retry]
    assert inner.closed_streams == 2


@pytest.mark.asyncio
async def test_stream_retry_before_any_output_discards_nothing() -> None:
    inner = ScriptedProvider(
        RateLimitError("slow", retry_after=3.0),
        [StreamToolCallDelta(index=0, id="c1", name="t"), END],
    )
    provider, sleep, _ = retrying(inner)
    events = await collect(provider)
    retry = events[0]
    assert isinstance(retry, StreamRetry)
    assert retry.partial_discarded is False
    assert retry.delay_s == 3.0
    assert events[-1] == END
    assert sleep.delays == [3.0]


@pytest.mark.asyncio
async def test_stream_fails_fast_on_permanent_errors() -> None:
    inner = ScriptedProvider(AuthenticationError("bad key", status_code=401))
    provider, sleep, _ = retrying(inner)
    with pytest.raises(AuthenticationError):
        await collect(provider)
    assert sleep.delays == []


@pytest.mark.asyncio
async def test_stream_reraises_after_the_last_attempt() -> None:
    inner = ScriptedProvider([StreamError("one")], [StreamError("two")], [StreamError("three")])
    provider, sleep, seen = retrying(inner, max_attempts=3)
    events: list[StreamEvent] = []
    with pytest.raises(StreamError, match="three"):
        async for event in provider.stream(REQUEST):
            events.append(event)
    assert [e.attempt for e in events if isinstance(e, StreamRetry)] == [1, 2]
    assert sleep.delays == [1.0, 2.0]
    assert len(seen) == 2


@pytest.mark.asyncio
async def test_abandoning_the_stream_closes_the_inner_stream() -> None:
    inner = ScriptedProvider([StreamTextDelta(text="a"), StreamTextDelta(text="b"), END])
    provider, _, _ = retrying(inner)
    stream = provider.stream(REQUEST)
    assert await anext(stream) == StreamTextDelta(text="a")
    await stream.aclose()  # type: ignore[attr-defined]
    assert inner.closed_streams == 1


@pytest.mark.asyncio
async def test_single_attempt_policy_never_retries() -> None:
    inner = ScriptedProvider(ServerError("x"))
    provider, sleep, _ = retrying(inner, max_attempts=1)
    with pytest.raises(ServerError):
        await provider.complete(REQUEST)
    assert sleep.delays == []


@pytest.mark.parametrize(
    "fields",
    [{"max_attempts": 0}, {"initial_delay": -1.0}, {"max_delay": -1.0}, {"factor": 0.5}],
)
def test_retry_policy_rejects_nonsense(fields: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**fields)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_retries_work_without_a_callback() -> None:
    sleep = FakeSleep()
    provider = RetryingProvider(
        ScriptedProvider(NetworkError("x"), []), sleep=sleep, random=lambda: 1.0
    )
    assert await provider.complete(REQUEST) == RESPONSE
    assert sleep.delays == [1.25]


@pytest.mark.asyncio
async def test_complete_s_retries_reach_the_listeners_of_the_enclosing_blocks() -> None:
    inner = ScriptedProvider(ServerError("503", status_code=503), NetworkError("x"), [])
    provider, _, _ = retrying(inner)
    outer: list[int] = []
    nested: list[int] = []
    with listening_for_retries(lambda retry: outer.append(retry.attempt)):
        with listening_for_retries(lambda retry: nested.append(retry.attempt)):
            await provider.complete(REQUEST)
        # Outside the inner block, only the outer listener hears.
        await retrying(ScriptedProvider(NetworkError("y"), []))[0].complete(REQUEST)
    assert nested == [1, 2]
    assert outer == [1, 2, 1]
    # And with no block around it, a call tells nobody.
    await retrying(ScriptedProvider(NetworkError("z"), []))[0].complete(REQUEST)
    assert outer == [1, 2, 1]


@pytest.mark.asyncio
async def test_stream_retries_are_yielded_not_told_to_listeners() -> None:
    inner = ScriptedProvider([StreamError("cut off")], [END])
    provider, _, _ = retrying(inner)
    heard: list[StreamRetry] = []
    with listening_for_retries(heard.append):
        events = await collect(provider)
    assert [type(event) for event in events] == [StreamRetry, StreamEnd]
    assert heard == []


@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": "nan"},
        {"Retry-After": "NaN"},
        {"Retry-After": "inf"},
        {"Retry-After": "-inf"},
        {"Retry-After": "-1"},
        {"Retry-After": "1e999"},
        {"retry-after-ms": "nan"},
        {"retry-after-ms": "-5"},
        {"retry-after-ms": "Infinity"},
    ],
)
def test_a_retry_after_that_is_not_a_finite_non_negative_number_is_ignored(
    headers: dict[str, str],
) -> None:
    assert parse_retry_after(headers) is None
    # The usual back-off applies.
    policy = RetryPolicy(initial_delay=1.0, factor=2.0, max_delay=30.0, jitter=False)
    assert backoff_delay(2, policy, retry_after=parse_retry_after(headers)) == 2.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_backoff_delay_ignores_a_non_finite_server_wait(bad: float) -> None:
    policy = RetryPolicy(initial_delay=1.0, factor=2.0, max_delay=30.0, jitter=False)
    assert backoff_delay(1, policy, retry_after=bad) == 1.0


def test_a_finite_retry_after_ms_wins_over_a_bad_retry_after() -> None:
    assert parse_retry_after({"retry-after-ms": "nan", "Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "1500", "Retry-After": "nan"}) == 1.5
