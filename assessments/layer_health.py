"""The channel layer as a service that may be down: one warning per outage, and a publish that
never holds up a run.

Live events are a convenience on top of the database: every event is saved before it is
published, and a run page reads the saved ones whenever the layer cannot bring them
(`assessments.consumers`). So a Redis that stops answering must cost the worker nothing but the
live delivery, and the log one warning when it goes and one line when it is back, not a
traceback per event or per read.

- `Outage` remembers whether the layer is down in this process, and says so once.
- `publish` sends to a group within `PUBLISH_TIMEOUT_S` (a Redis paused by SIGSTOP accepts
  connections and never answers; redis-py's own retries on a refused connection take seconds).
  After a failure it does not try again for `RETRY_AFTER_S`: a run publishing many events a
  second through a dead layer would otherwise wait out the time limit for each one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger("releases.live")

# A healthy layer takes a millisecond or so; a loaded machine, a few hundred.
PUBLISH_TIMEOUT_S = 1.0
# After a failed publish, events go unpublished (pages read them back) for this long.
RETRY_AFTER_S = 2.0


def describe(error: BaseException) -> str:
    """An error in one line: its type and the first line of its message."""
    text = str(error).strip()
    first = text.splitlines()[0][:200] if text else "no message"
    return f"{type(error).__name__}: {first}"


class Outage:
    """Whether the channel layer is down, as this process found it; logs each change once."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.since: float | None = None
        self._ended_at = float("-inf")

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, error: BaseException, started: float | None = None) -> None:
        """An operation on the layer failed. `started`: when it began, so that an attempt
        begun before the layer came back does not open a new outage."""
        with self._lock:
            if self.since is not None:
                return
            if started is not None and started < self._ended_at:
                return
            self.since = self._clock()
        logger.warning(
            "the channel layer is not answering (%s); run pages read the database until it is back",
            describe(error),
        )

    def recovered(self) -> None:
        with self._lock:
            if self.since is None:
                return
            lasted = self._clock() - self.since
            self.since = None
            self._ended_at = self._clock()
        logger.warning("the channel layer answers again, after %.1f s", lasted)


outage = Outage()


class Publisher:
    """Group sends with a time limit, and none for a while after one failed."""

    def __init__(
        self,
        send: Callable[[str, dict[str, Any]], None],
        health: Outage,
        *,
        retry_after: float = RETRY_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._health = health
        self._retry_after = retry_after
        self._clock = clock
        self._skip_until = float("-inf")

    def publish(self, group: str, message: dict[str, Any]) -> bool:
        """True when the message went to the layer; False when it was not sent (the layer
        failed now or a moment ago): the pages read the event from the database."""
        started = self._clock()
        if started < self._skip_until:
            return False
        try:
            self._send(group, message)
        except Exception as error:
            self._skip_until = self._clock() + self._retry_after
            self._health.failed(error, started)
            return False
        self._health.recovered()
        return True


async def _group_send_in_time(layer: Any, group: str, message: dict[str, Any]) -> None:
    async with asyncio.timeout(PUBLISH_TIMEOUT_S):
        await layer.group_send(group, message)


def _group_send(group: str, message: dict[str, Any]) -> None:
    # The layer is built outside the time limit: its first build imports channels_redis and
    # redis.asyncio (0.6 s idle, over a second on a loaded machine), which is no outage.
    async_to_sync(_group_send_in_time)(get_channel_layer(), group, message)


_publisher = Publisher(_group_send, outage)


def publish(group: str, message: dict[str, Any]) -> bool:
    """Send `message` to `group` on the default layer, if the layer answers in time."""
    return _publisher.publish(group, message)
