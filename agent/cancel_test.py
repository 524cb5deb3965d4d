from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator

import pytest

from agent.cancel import CancelToken, cancellable, unless_cancelled
from agent.errors import RunCancelledError


async def test_token_starts_clear_and_stays_set() -> None:
    token = CancelToken()
    assert not token.is_set
    token.set("stop")
    token.set("ignored")
    assert token.is_set
    assert token.reason == "stop"
    await asyncio.wait_for(token.wait(), 1)


async def test_wait_wakes_when_set_from_another_thread() -> None:
    token = CancelToken()
    waiter = asyncio.ensure_future(token.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    thread = threading.Thread(target=token.set)
    thread.start()
    thread.join()
    await asyncio.wait_for(waiter, 1)
    assert token._waiters == []


async def test_cancelled_wait_leaves_no_waiter_behind() -> None:
    token = CancelToken()
    waiter = asyncio.ensure_future(token.wait())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert token._waiters == []


class Source:
    def __init__(self, stall_after: int | None = None) -> None:
        self.stall_after = stall_after
        self.closed = False
        self.stall = asyncio.Event()

    async def items(self) -> AsyncGenerator[int, None]:
        try:
            for i in range(5):
                if self.stall_after is not None and i >= self.stall_after:
                    await self.stall.wait()
                yield i
        finally:
            self.closed = True


async def test_cancellable_passes_everything_through() -> None:
    source = Source()
    assert [i async for i in cancellable(source.items(), CancelToken())] == [0, 1, 2, 3, 4]
    assert source.closed
    source = Source()
    assert [i async for i in cancellable(source.items(), None)] == [0, 1, 2, 3, 4]


async def test_cancellable_interrupts_a_stalled_source_and_closes_it() -> None:
    source = Source(stall_after=2)
    token = CancelToken()
    seen: list[int] = []

    async def consume() -> None:
        async for item in cancellable(source.items(), token):
            seen.append(item)
            if item == 1:
                asyncio.get_running_loop().call_later(0.01, token.set, "enough")

    with pytest.raises(RunCancelledError, match="enough"):
        await consume()
    assert seen == [0, 1]
    assert source.closed


async def test_cancellable_stops_between_items_once_set() -> None:
    source = Source()
    token = CancelToken()
    seen: list[int] = []

    async def consume() -> None:
        async for item in cancellable(source.items(), token):
            seen.append(item)
            token.set()

    with pytest.raises(RunCancelledError):
        await consume()
    assert seen == [0]
    assert source.closed


async def test_cancellable_propagates_source_errors() -> None:
    async def failing() -> AsyncGenerator[int, None]:
        yield 1
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        async for _ in cancellable(failing(), CancelToken()):
            pass


async def test_consumer_cancellation_cleans_up() -> None:
    source = Source(stall_after=1)
    token = CancelToken()

    async def consume() -> None:
        async for _ in cancellable(source.items(), token):
            pass

    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert source.closed


async def test_without_a_token_the_source_is_iterated_as_it_is() -> None:
    # Nothing to race: no task and no wait per item (a streamed chunk each).
    source = Source().items()
    assert cancellable(source, None) is source
    await source.aclose()


async def test_a_cancelled_read_leaves_the_task_able_to_go_on() -> None:
    source = Source(stall_after=1)
    token = CancelToken()

    async def consume() -> str:
        try:
            async for _ in cancellable(source.items(), token):
                threading.Timer(0.01, token.set, args=("from a thread",)).start()
        except RunCancelledError as error:
            # The cancellation was taken back: awaiting still works afterwards.
            await asyncio.sleep(0)
            return str(error)
        return "not cancelled"

    task = asyncio.ensure_future(consume())
    assert await asyncio.wait_for(task, 2) == "from a thread"
    assert task.cancelling() == 0
    assert source.closed


async def test_a_task_cancelled_from_outside_stays_cancelled_even_if_the_token_fires() -> None:
    source = Source(stall_after=1)
    token = CancelToken()

    async def consume() -> None:
        async for _ in cancellable(source.items(), token):
            pass

    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0.01)
    task.cancel()
    token.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert source.closed


async def test_a_source_that_swallows_the_cancellation_is_stopped_anyway() -> None:
    token = CancelToken()

    async def stubborn() -> AsyncGenerator[int, None]:
        yield 0
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(10)
        yield 1

    async def consume() -> list[int]:
        seen = []
        async for item in cancellable(stubborn(), token):
            seen.append(item)
            asyncio.get_running_loop().call_later(0.01, token.set)
        return seen

    task = asyncio.ensure_future(consume())
    with pytest.raises(RunCancelledError):
        await asyncio.wait_for(task, 2)
    assert task.cancelling() == 0


async def test_unless_cancelled_returns_the_result_or_stops_the_work_at_once() -> None:
    async def work(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    assert await unless_cancelled(work(0), CancelToken()) == "done"
    assert await unless_cancelled(work(0), None) == "done"
    token = CancelToken()
    slow = asyncio.ensure_future(work(30))
    asyncio.get_running_loop().call_later(0.01, token.set, "stop")
    with pytest.raises(RunCancelledError, match="stop"):
        await asyncio.wait_for(unless_cancelled(slow, token), 5)
    assert slow.cancelled()
    assert token._waiters == []
    with pytest.raises(RunCancelledError):  # already set: the work never starts
        await unless_cancelled(work(30), token)
