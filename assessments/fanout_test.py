"""The process's one membership per group, against Channels' in-memory layer."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer

from assessments.fanout import LIVE_AGAIN, GroupFanout, Subscription
from assessments.layer_health import Outage


class Collector:
    def __init__(self, delay: float = 0.0) -> None:
        self.seen: list[int] = []
        self.delay = delay
        self.got = asyncio.Event()

    async def __call__(self, message: dict[str, Any]) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        self.seen.append(message["n"])
        self.got.set()


async def send(layer: InMemoryChannelLayer, count: int, group: str = "run-1") -> None:
    for n in range(1, count + 1):
        await layer.group_send(group, {"type": "run.event", "n": n})


async def until(condition: Any, timeout: float = 2.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)


async def test_many_pages_share_one_membership_and_each_sees_every_event_in_order() -> None:
    layer = InMemoryChannelLayer()
    fanout = GroupFanout(layer)
    pages = [Collector() for _ in range(50)]
    subscriptions = [await fanout.subscribe("run-1", page) for page in pages]

    assert len(layer.groups["run-1"]) == 1
    await send(layer, 20)
    await until(lambda: all(len(page.seen) == 20 for page in pages))
    assert all(page.seen == list(range(1, 21)) for page in pages)

    for subscription in subscriptions:
        await fanout.unsubscribe("run-1", subscription)


async def test_the_last_page_to_leave_takes_the_process_out_of_the_group() -> None:
    layer = InMemoryChannelLayer()
    fanout = GroupFanout(layer)
    first = await fanout.subscribe("run-1", Collector())
    second = await fanout.subscribe("run-1", Collector())

    await fanout.unsubscribe("run-1", first)
    assert fanout.subscribers("run-1") == 1 and layer.groups.get("run-1")
    await fanout.unsubscribe("run-1", second)
    assert fanout.subscribers("run-1") == 0 and not layer.groups.get("run-1")

    # Coming back joins again.
    page = Collector()
    third = await fanout.subscribe("run-1", page)
    await send(layer, 1)
    await until(lambda: page.seen == [1])
    await fanout.unsubscribe("run-1", third)


async def test_groups_are_kept_apart() -> None:
    layer = InMemoryChannelLayer()
    fanout = GroupFanout(layer)
    one, two = Collector(), Collector()
    subscriptions = [await fanout.subscribe("run-1", one), await fanout.subscribe("run-2", two)]

    await send(layer, 2, group="run-2")
    await until(lambda: len(two.seen) == 2)
    await asyncio.sleep(0.05)
    assert one.seen == []
    await fanout.unsubscribe("run-1", subscriptions[0])
    await fanout.unsubscribe("run-2", subscriptions[1])


async def test_a_slow_page_holds_up_nobody_else() -> None:
    layer = InMemoryChannelLayer()
    fanout = GroupFanout(layer)
    slow, quick = Collector(delay=0.2), Collector()
    subscriptions = [await fanout.subscribe("run-1", slow), await fanout.subscribe("run-1", quick)]

    await send(layer, 3)
    await until(lambda: len(quick.seen) == 3, timeout=0.15)
    assert len(slow.seen) < 3
    await until(lambda: slow.seen == [1, 2, 3])
    for subscription in subscriptions:
        await fanout.unsubscribe("run-1", subscription)


async def test_a_page_too_far_behind_misses_events_rather_than_growing_without_bound() -> None:
    stuck = asyncio.Event()
    seen: list[int] = []

    async def blocked(message: dict[str, Any]) -> None:
        await stuck.wait()
        seen.append(message["n"])

    subscription = Subscription(blocked, capacity=2)
    subscription.offer({"n": 1})
    await asyncio.sleep(0.01)  # the page takes it in hand, and is stuck sending it
    for n in range(2, 6):
        subscription.offer({"n": n})
    stuck.set()
    await until(lambda: len(seen) >= 3)
    await asyncio.sleep(0.05)
    # The one in hand, then the two the queue held; the consumer reads the rest back by seq.
    assert seen == [1, 2, 3]
    await subscription.close()


async def test_a_failing_handler_does_not_end_the_page_s_subscription() -> None:
    seen: list[int] = []

    async def flaky(message: dict[str, Any]) -> None:
        if message["n"] == 1:
            raise RuntimeError("boom")
        seen.append(message["n"])

    subscription = Subscription(flaky)
    subscription.offer({"n": 1})
    subscription.offer({"n": 2})
    await until(lambda: seen == [2])
    await subscription.close()


async def test_the_reader_goes_on_after_the_layer_fails_once(monkeypatch: Any) -> None:
    monkeypatch.setattr("assessments.fanout.READ_RETRY_SECONDS", 0.01)
    layer = InMemoryChannelLayer()
    real_receive = layer.receive
    failures = [ConnectionError("redis restarting")]

    async def receive(channel: str) -> dict[str, Any]:
        if failures:
            raise failures.pop()
        return await real_receive(channel)

    layer.receive = receive  # type: ignore[method-assign]
    fanout = GroupFanout(layer)
    page = Collector()
    subscription = await fanout.subscribe("run-1", page)
    await send(layer, 2)
    await until(lambda: page.seen == [1, 2])
    await fanout.unsubscribe("run-1", subscription)


class BlinkingLayer(InMemoryChannelLayer):  # type: ignore[misc]
    """An in-memory layer that can be down (refusing), paused (never answering) or restarted
    (its groups forgotten), as Redis can."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.paused = asyncio.Event()
        self.paused.set()

    async def _check(self) -> None:
        await self.paused.wait()
        if self.down:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")

    async def group_add(self, group: str, channel: str) -> None:
        await self._check()
        await super().group_add(group, channel)

    async def receive(self, channel: str) -> dict[str, Any]:
        await self._check()
        message = await super().receive(channel)
        await self._check()
        return dict(message)

    def restart(self) -> None:
        self.groups.clear()


class Recorder(Collector):
    async def __call__(self, message: dict[str, Any]) -> None:
        if message.get("type") == LIVE_AGAIN:
            self.seen.append(0)
        else:
            await super().__call__(message)


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("assessments.fanout.READ_RETRY_SECONDS", 0.01)
    monkeypatch.setattr("assessments.fanout.JOIN_TIMEOUT_S", 0.1)
    monkeypatch.setattr("assessments.fanout.REJOIN_EVERY_S", 0.05)


async def test_a_layer_that_is_down_makes_a_subscription_that_is_not_live_and_one_warning(
    quick: None, caplog: pytest.LogCaptureFixture
) -> None:
    layer = BlinkingLayer()
    layer.down = True
    fanout = GroupFanout(layer, Outage())
    page = Recorder()
    subscription = await fanout.subscribe("run-1", page)
    assert not subscription.live
    await asyncio.sleep(0.3)  # a few dozen tries to join and to read
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "the channel layer is not answering (ConnectionError: Error 111 connecting to "
        "127.0.0.1:6390. Connection refused.); run pages read the database until it is back"
    ]

    layer.down = False
    await until(lambda: subscription.live)
    await until(lambda: page.seen == [0])  # told it is live again, before any event
    await send(layer, 2)
    await until(lambda: page.seen == [0, 1, 2])
    assert "answers again" in caplog.records[-1].getMessage()
    await fanout.unsubscribe("run-1", subscription)


async def test_a_layer_that_restarted_and_forgot_its_groups_is_joined_again(quick: None) -> None:
    layer = BlinkingLayer()
    fanout = GroupFanout(layer, Outage())
    page = Recorder()
    subscription = await fanout.subscribe("run-1", page)
    layer.restart()  # no error reached us: redis-py reconnected by itself
    await until(lambda: bool(layer.groups.get("run-1")))
    await send(layer, 1)
    await until(lambda: page.seen == [1])
    await fanout.unsubscribe("run-1", subscription)


async def test_a_paused_layer_holds_up_neither_subscribing_nor_leaving(quick: None) -> None:
    layer = BlinkingLayer()
    layer.paused.clear()  # SIGSTOP: connections accepted, nothing answered
    fanout = GroupFanout(layer, Outage())
    async with asyncio.timeout(1):
        subscription = await fanout.subscribe("run-1", Recorder())
        assert not subscription.live
        await fanout.unsubscribe("run-1", subscription)
    layer.paused.set()
