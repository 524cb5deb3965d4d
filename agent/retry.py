"""Retrying failed model calls: small pure functions, and a provider that uses them.

- `should_retry(error)`: retry rate limits (429), server trouble (408, 409, 5xx,
  "overloaded"), network errors, timeouts and broken streams; fail fast on everything
  that would fail again the same way (400/422, 401/403, 404, configuration).
- `parse_retry_after(headers, now)`: the server's own wait, from `retry-after-ms`
  (milliseconds) or `Retry-After` (seconds, or an HTTP date).
- `backoff_delay(attempt, policy, random, retry_after)`: `initial_delay * factor **
  (attempt - 1)`, plus up to 25% jitter so that many clients do not retry in step,
  capped by `max_delay`. A server-provided retry-after (RateLimitError and ServerError
  carry it) wins over the computed delay, but is capped by `max_delay` too: a run
  should not hang for an hour on a header.
- `RetryingProvider(inner, policy)`: a Provider wrapping a Provider.

A stream that fails after it has started
-----------------------------------------
Model calls have no side effects, so the whole request is simply sent again. Before
sleeping, the stream yields a `StreamRetry` event whose `partial_discarded` is True when
text or tool-call deltas of the failed attempt had already been yielded. Consumers use it
to drop what they showed of that step: the retried attempt streams the reply again from
its start, and its `StreamEnd` carries the complete response. Nothing is stitched
together from two attempts, because a model does not reliably continue where another
sample stopped. After the last attempt the last error is raised.

The retries of `complete`
-------------------------
`complete` has no stream to yield a `StreamRetry` into. Its callers that need to know (the
traced provider for its retry spans, the loop for its `RetryScheduled` events when streaming
is off) listen for the retries of the calls they make with `listening_for_retries(...)`.
"""

from __future__ import annotations

import asyncio
import math
import random as _random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from agent.errors import (
    ConfigurationError,
    NetworkError,
    ProviderError,
    RateLimitError,
    ServerError,
    StreamError,
)
from agent.messages import Message
from agent.providers.protocol import (
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderCapabilities,
    StreamEvent,
    StreamRetry,
    StreamTextDelta,
    StreamToolCallDelta,
)

JITTER_FRACTION = 0.25
RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Output the caller has seen (a tuple: `A | B` would build a union on every chunk).
_PARTIAL_OUTPUT = (StreamTextDelta, StreamToolCallDelta)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    initial_delay: float = 1.0
    max_delay: float = 60.0
    factor: float = 2.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError("a retry policy needs max_attempts of at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.factor < 1:
            raise ConfigurationError(
                "retry delays must not be negative, and the backoff factor at least 1"
            )


def should_retry(error: BaseException) -> bool:
    if isinstance(error, RateLimitError | ServerError | NetworkError | StreamError):
        return True
    if type(error) is ProviderError and error.status_code is not None:
        # An error no adapter classified more precisely: judge it by its status alone.
        return error.status_code in RETRYABLE_STATUSES or error.status_code >= 500
    return False


def _wait(text: str, scale: float = 1.0) -> float | None:
    """A wait in seconds from a header's number, or None when it is not a finite non-negative
    number (NaN, inf and -1 are ignored: the usual back-off applies)."""
    try:
        value = float(text) * scale
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def parse_retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds to wait as the server asked, or None when it did not say (or said
    something unreadable: not a number, NaN, infinite, negative)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    milliseconds = lowered.get("retry-after-ms")
    if milliseconds is not None and (wait := _wait(milliseconds, 1 / 1000.0)) is not None:
        return wait
    value = lowered.get("retry-after")
    if value is None:
        return None
    if (wait := _wait(value)) is not None:
        return wait
    try:
        float(value)
    except ValueError:
        pass
    else:
        return None  # a number, but not one to wait for
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    return max((when - now).total_seconds(), 0.0)


def backoff_delay(
    attempt: int,
    policy: RetryPolicy,
    random: Callable[[], float] = _random.random,
    retry_after: float | None = None,
) -> float:
    """Seconds to wait after failed attempt number `attempt` (counting from 1)."""
    if retry_after is not None and math.isfinite(retry_after):
        return min(max(retry_after, 0.0), policy.max_delay)
    delay = policy.initial_delay * policy.factor ** max(attempt - 1, 0)
    if policy.jitter:
        delay += delay * JITTER_FRACTION * random()
    return min(delay, policy.max_delay)


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


RetryCallback = Callable[[StreamRetry], Awaitable[None] | None]
RetryListener = Callable[[StreamRetry], None]

# Who hears of the retries of the `complete` calls made in this context, outermost first.
_retry_listeners: ContextVar[tuple[RetryListener, ...]] = ContextVar("retry_listeners", default=())


@contextmanager
def listening_for_retries(listener: RetryListener) -> Iterator[None]:
    """Within the block, every retry a RetryingProvider's `complete` schedules is handed to
    `listener` before the wait (as well as to any listener of an enclosing block)."""
    token = _retry_listeners.set((*_retry_listeners.get(), listener))
    try:
        yield
    finally:
        _retry_listeners.reset(token)


class RetryingProvider:
    """A Provider that retries its inner provider's retryable failures."""

    def __init__(
        self,
        inner: Provider,
        policy: RetryPolicy | None = None,
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        random: Callable[[], float] = _random.random,
        on_retry: RetryCallback | None = None,
    ) -> None:
        self.inner = inner
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._random = random
        # `complete` has no stream to yield a StreamRetry into; this is how its retries
        # become events and spans. `stream` calls it too, so one hook sees every retry.
        self._on_retry = on_retry

    def __repr__(self) -> str:
        return f"RetryingProvider({self.inner!r}, {self.policy!r})"

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    def estimate_tokens(self, messages: Sequence[Message], system: str = "") -> int:
        return self.inner.estimate_tokens(messages, system)

    def capabilities(self) -> ProviderCapabilities:
        return self.inner.capabilities()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        attempt = 1
        while True:
            try:
                return await self.inner.complete(request)
            except ProviderError as error:
                retry = self._plan_retry(error, attempt, partial=False)
                if retry is None:
                    raise
            for listener in _retry_listeners.get():
                listener(retry)
            await self._announce(retry)
            await self._sleep(retry.delay_s)
            attempt += 1

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        attempt = 1
        while True:
            partial = False
            inner = self.inner.stream(request)
            try:
                async for event in inner:
                    if isinstance(event, _PARTIAL_OUTPUT):
                        partial = True
                    yield event
                return
            except ProviderError as error:
                retry = self._plan_retry(error, attempt, partial=partial)
                if retry is None:
                    raise
            finally:
                # Close the failed (or abandoned) attempt's HTTP stream right away.
                aclose = getattr(inner, "aclose", None)
                if aclose is not None:
                    await aclose()
            await self._announce(retry)
            yield retry
            await self._sleep(retry.delay_s)
            attempt += 1

    def _plan_retry(
        self, error: ProviderError, attempt: int, *, partial: bool
    ) -> StreamRetry | None:
        if attempt >= self.policy.max_attempts or not should_retry(error):
            return None
        delay = backoff_delay(
            attempt,
            self.policy,
            self._random,
            retry_after=getattr(error, "retry_after", None),
        )
        return StreamRetry(
            attempt=attempt,
            max_attempts=self.policy.max_attempts,
            delay_s=delay,
            reason=describe(error),
            error_type=type(error).__name__,
            partial_discarded=partial,
        )

    async def _announce(self, retry: StreamRetry) -> None:
        if self._on_retry is None:
            return
        result = self._on_retry(retry)
        if result is not None:
            await result
