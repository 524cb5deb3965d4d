"""One channel-layer membership per group per web process, shared by every page watching it.

A run's events go to the group `run-<id>`. If each page's consumer joined the group itself, a
hundred pages on one run would cost a hundred deliveries per event through the layer; with
channels_redis's core layer that is a hundred entries in this process's inbox, popped one
blocking round trip at a time, so the hundredth page saw a word hundreds of milliseconds after
the first (benchmark 3). Here the process joins once, reads each event once, and hands it to
its pages in memory.

Each page gets a `Subscription`: its own queue and its own task, so pages receive events in
order and a slow page holds up nobody else. A page whose queue is full misses events; the
consumer notices the gap by sequence number and reads them from the database.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[None]]

# Events a page may fall behind by before it misses some (and reads them back).
SUBSCRIPTION_CAPACITY = 1000
# After the layer fails to deliver (Redis restarting, say), wait this long before reading again.
READ_RETRY_SECONDS = 0.5


class Subscription:
    """One page's share of a group: its events, in order, handed to `handler` one at a time."""

    def __init__(self, handler: Handler, capacity: int = SUBSCRIPTION_CAPACITY) -> None:
        self._handler = handler
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=capacity)
        self._task = asyncio.get_running_loop().create_task(self._drain())

    def offer(self, message: dict[str, Any]) -> None:
        if not self._queue.full():
            self._queue.put_nowait(message)

    async def close(self) -> None:
        if self._task is asyncio.current_task():
            return  # the handler itself ended the page; its task ends with it
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _drain(self) -> None:
        while True:
            message = await self._queue.get()
            try:
                await self._handler(message)
            except Exception:
                logger.exception("a page's live event handler failed")


@dataclass
class _Membership:
    channel: str
    reader: asyncio.Task[None]
    subscriptions: set[Subscription] = field(default_factory=set)


class GroupFanout:
    """The groups this process is a member of, each read by one task."""

    def __init__(self, layer: Any) -> None:
        self._layer = layer
        self._memberships: dict[str, _Membership] = {}
        # Joins and leaves await the layer; one at a time, so a group is joined once.
        self._lock = asyncio.Lock()

    async def subscribe(self, group: str, handler: Handler) -> Subscription:
        """Every message sent to `group` from the moment this returns reaches `handler`."""
        async with self._lock:
            membership = self._memberships.get(group)
            if membership is None:
                channel = await self._layer.new_channel()
                await self._layer.group_add(group, channel)
                reader = asyncio.get_running_loop().create_task(
                    self._read(group, channel), name=f"fanout {group}"
                )
                membership = self._memberships[group] = _Membership(channel, reader)
            subscription = Subscription(handler)
            membership.subscriptions.add(subscription)
            return subscription

    async def unsubscribe(self, group: str, subscription: Subscription) -> None:
        await subscription.close()
        async with self._lock:
            membership = self._memberships.get(group)
            if membership is None:
                return
            membership.subscriptions.discard(subscription)
            if membership.subscriptions:
                return
            del self._memberships[group]
            membership.reader.cancel()
            await asyncio.gather(membership.reader, return_exceptions=True)
            await self._layer.group_discard(group, membership.channel)

    def subscribers(self, group: str) -> int:
        membership = self._memberships.get(group)
        return len(membership.subscriptions) if membership else 0

    async def _read(self, group: str, channel: str) -> None:
        while True:
            try:
                message = await self._layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("reading the live events of %s failed; reading again", group)
                await asyncio.sleep(READ_RETRY_SECONDS)
                continue
            membership = self._memberships.get(group)
            for subscription in list(membership.subscriptions if membership else ()):
                subscription.offer(message)


_fanouts: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, GroupFanout] = (
    weakref.WeakKeyDictionary()
)


def fanout() -> GroupFanout:
    """This event loop's fan-out over the default channel layer (one loop per web server)."""
    loop = asyncio.get_running_loop()
    instance = _fanouts.get(loop)
    if instance is None:
        instance = _fanouts[loop] = GroupFanout(get_channel_layer())
    return instance
