"""Cooperative cancellation for agent runs.

A `CancelToken` is set from anywhere (a signal handler, another thread, a websocket
consumer) and observed by the loop between steps, between tool calls and while a model
response streams in. The loop then closes the in-flight stream and ends the run with a
`RunCancelled` event instead of raising, so the history and the saved events stay whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Awaitable
from typing import TypeVar

from agent.errors import RunCancelledError

T = TypeVar("T")


class CancelToken:
    """A one-way flag: once set it stays set. Safe to set from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flag = threading.Event()
        self._reason = "cancelled"
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def is_set(self) -> bool:
        return self._flag.is_set()

    @property
    def reason(self) -> str:
        return self._reason

    def set(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self._flag.is_set():
                return
            self._reason = reason
            self._flag.set()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            # The waiter may live on another thread's loop: wake it there. A closed loop
            # has nobody waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, future)

    async def wait(self) -> None:
        """Return once the token is set."""
        future = self._watch()
        try:
            await future
        finally:
            self._unwatch(future)

    def _watch(self) -> asyncio.Future[None]:
        """A future of the running loop, resolved when the token is set (no task needed)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._flag.is_set():
                future.set_result(None)
            else:
                self._waiters.append((loop, future))
        return future

    def _unwatch(self, future: asyncio.Future[None]) -> None:
        with self._lock:
            entry = (future.get_loop(), future)
            if entry in self._waiters:
                self._waiters.remove(entry)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def cancellable(
    source: AsyncGenerator[T, None], token: CancelToken | None
) -> AsyncGenerator[T, None]:
    """Iterate `source` until it ends or `token` is set, whichever comes first.

    A stalled stream does not delay cancellation: when the token is set while the
    consumer's task waits inside a read, that task is cancelled there (as
    `asyncio.timeout` does), the cancellation is taken back, `source` is closed (so its
    HTTP response is released) and `RunCancelledError` is raised. Between reads, the
    token is checked before each one. Reads run in the consumer's own task and context:
    no task and no wait per item (a streamed chunk each), which at a few hundred chunks
    a run used to cost more than the loop itself.

    Without a token there is nothing to race: `source` itself is returned.
    """
    if token is None:
        return source
    return _race(source, token)


async def _race(source: AsyncGenerator[T, None], token: CancelToken) -> AsyncGenerator[T, None]:
    task = asyncio.current_task()
    if task is None:  # pragma: no cover - an async generator always runs in a task
        raise RuntimeError("cancellable() must run inside an asyncio task")
    reading = False
    interrupted = False

    def interrupt(waited: asyncio.Future[None]) -> None:
        nonlocal interrupted
        # Callbacks run while the task is suspended: when it is reading, it waits inside
        # the read, and the cancellation lands there.
        if reading and not interrupted and not waited.cancelled():
            interrupted = True
            task.cancel()

    waiter = token._watch()
    waiter.add_done_callback(interrupt)
    try:
        while True:
            if token.is_set:
                raise RunCancelledError(token.reason)
            reading = True
            try:
                item = await anext(source)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                # Ours, and nobody else's too: the run is cancelled, not the task.
                if interrupted and task.uncancel() == 0:
                    raise RunCancelledError(token.reason) from None
                raise
            finally:
                reading = False
            if interrupted:
                # The source swallowed the cancellation and went on: stop all the same.
                task.uncancel()
                raise RunCancelledError(token.reason)
            yield item
    finally:
        waiter.remove_done_callback(interrupt)
        token._unwatch(waiter)
        await source.aclose()


async def unless_cancelled(work: Awaitable[T], token: CancelToken | None) -> T:
    """`work`'s result, unless `token` is set first: then `work` is cancelled (its HTTP
    request released) and `RunCancelledError` raised at once. A tool call retrying a release
    API that is gone (the site stopping: `up` killed, its web server with it) would otherwise
    keep a stopping worker's run alive until the tool's deadline, 25 s and more."""
    if token is None:
        return await work
    if token.is_set:
        if asyncio.iscoroutine(work):
            work.close()  # never started: nothing to cancel, no "never awaited" warning
        raise RunCancelledError(token.reason)
    task = asyncio.ensure_future(work)
    waiter = token._watch()
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        token._unwatch(waiter)
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    raise RunCancelledError(token.reason)
