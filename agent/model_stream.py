"""The model's answer as the agent loop reads it: a stream of `StreamEvent`s, whatever the
provider and the configuration.

`CompleteAsStream` makes one `complete()` call look like a stream (`AgentConfig.stream`
off); `as_generator` makes any async iterator an async generator, which
`agent.cancel.cancellable` can close; `retry_event` turns a retry the stream announced into
the event the loop saves.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from agent.errors import ProviderError
from agent.events import RetryScheduled
from agent.providers.protocol import ModelRequest, Provider, StreamEnd, StreamEvent, StreamRetry
from agent.retry import listening_for_retries


async def as_generator(
    events: AsyncIterator[StreamEvent],
) -> AsyncGenerator[StreamEvent, None]:
    """Any async iterator as an async generator, which `cancellable` can close."""
    aclose = getattr(events, "aclose", None)
    try:
        async for event in events:
            yield event
    finally:
        if aclose is not None:
            await aclose()


def retry_event(event: StreamRetry) -> RetryScheduled:
    return RetryScheduled(
        attempt=event.attempt,
        max_attempts=event.max_attempts,
        delay_s=event.delay_s,
        reason=event.reason,
        error_type=event.error_type,
        partial_discarded=event.partial_discarded,
    )


class CompleteAsStream:
    """A provider whose `stream()` makes one `complete()` call: `AgentConfig.stream`
    off."""

    def __init__(self, inner: Provider) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        # Retries happen inside `complete`; with no stream to show them on as they happen,
        # they are reported once the call is over (succeeded or failed), before its end.
        retries: list[StreamRetry] = []
        try:
            with listening_for_retries(retries.append):
                response = await self._inner.complete(request)
        except ProviderError:
            for retry in retries:
                yield retry
            raise
        for retry in retries:
            yield retry
        yield StreamEnd(response=response)
