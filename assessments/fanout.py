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

The layer may be down (Redis stopped or restarting). Subscribing never waits on it for long
nor fails because of it: a subscription says whether it is `live`, and while it is not, its
page reads the database instead (`assessments.consumers`). Each membership has a keeper that
joins the group, and joins it again every `REJOIN_EVERY_S` (a Redis that restarted has lost
its groups, and redis-py may reconnect without an error reaching us); when a join succeeds
after a failure, the subscriptions get a `LIVE_AGAIN` message, so that their pages read what
went by meanwhile. One warning per outage (`assessments.layer_health`), not one per try.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from channels.layers import get_channel_layer

from assessments.layer_health import Outage, outage

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[None]]

# Events a page may fall behind by before it misses some (and reads them back).
SUBSCRIPTION_CAPACITY = 1000
# After the layer fails (Redis restarting, say), wait this long before reading or joining again.
READ_RETRY_SECONDS = 0.5
# A join that takes longer than this failed: a paused Redis accepts and never answers. (Not
# less: a loaded machine is slow, and a false outage costs its pages a poll a second.)
JOIN_TIMEOUT_S = 5.0
# A live membership joins its group again this often (see the module's docstring).
REJOIN_EVERY_S = 2.0
# The message a subscription gets when its group is live again after an outage.
LIVE_AGAIN = "fanout.live_again"


class Subscription:
    """One page's share of a group: its events, in order, handed to `handler` one at a time.

    `live` is False while the layer is down: events may then not come, and the page reads
    the database instead."""

    def __init__(self, handler: Handler, capacity: int = SUBSCRIPTION_CAPACITY) -> None:
        self._handler = handler
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=capacity)
        self._task = asyncio.get_running_loop().create_task(self._drain())
        self.live = True

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
    live: bool = False
    subscriptions: set[Subscription] = field(default_factory=set)
    # Set by the reader when the layer fails, to wake the keeper at once.
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class GroupFanout:
    """The groups this process is a member of, each read by one task and kept by another."""

    def __init__(self, layer: Any, health: Outage = outage) -> None:
        self._layer = layer
        self._health = health
        self._memberships: dict[str, _Membership] = {}
        # Joins and leaves await the layer; one at a time, so a group is joined once.
        self._lock = asyncio.Lock()

    async def subscribe(self, group: str, handler: Handler) -> Subscription:
        """Every message sent to `group` from the moment this returns reaches `handler`, as
        long as the subscription is `live` (it is not when the layer is down)."""
        async with self._lock:
            membership = self._memberships.get(group)
            if membership is None:
                membership = _Membership(await self._layer.new_channel())
                await self._join(group, membership)
                loop = asyncio.get_running_loop()
                membership.tasks = [
                    loop.create_task(self._read(group, membership), name=f"fanout {group}"),
                    loop.create_task(self._keep(group, membership), name=f"fanout keep {group}"),
                ]
                self._memberships[group] = membership
            subscription = Subscription(handler)
            subscription.live = membership.live
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
            for task in membership.tasks:
                task.cancel()
            await asyncio.gather(*membership.tasks, return_exceptions=True)
            # A layer that is down forgets the membership by itself (its group expiry).
            with contextlib.suppress(Exception):
                async with asyncio.timeout(JOIN_TIMEOUT_S):
                    await self._layer.group_discard(group, membership.channel)

    def subscribers(self, group: str) -> int:
        membership = self._memberships.get(group)
        return len(membership.subscriptions) if membership else 0

    def is_live(self, group: str) -> bool:
        membership = self._memberships.get(group)
        return membership is not None and membership.live

    async def _join(self, group: str, membership: _Membership) -> None:
        started = time.monotonic()
        try:
            async with asyncio.timeout(JOIN_TIMEOUT_S):
                await self._layer.group_add(group, membership.channel)
        except Exception as error:
            self._lost(membership, error, started)
            return
        self._health.recovered()
        if not membership.live:
            membership.live = True
            for subscription in list(membership.subscriptions):
                subscription.live = True
                subscription.offer({"type": LIVE_AGAIN})

    def _lost(self, membership: _Membership, error: BaseException, started: float) -> None:
        self._health.failed(error, started)
        membership.live = False
        membership.lost.set()
        for subscription in list(membership.subscriptions):
            subscription.live = False

    async def _keep(self, group: str, membership: _Membership) -> None:
        while True:
            if membership.live:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(REJOIN_EVERY_S):
                        await membership.lost.wait()
            else:
                await asyncio.sleep(READ_RETRY_SECONDS)
            membership.lost.clear()
            await self._join(group, membership)

    async def _read(self, group: str, membership: _Membership) -> None:
        while True:
            started = time.monotonic()
            try:
                message = await self._layer.receive(membership.channel)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self._lost(membership, error, started)
                await asyncio.sleep(READ_RETRY_SECONDS)
                continue
            for subscription in list(membership.subscriptions):
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
