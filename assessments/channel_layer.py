"""A broker-free channel layer that crosses processes: a small SQLite file in the data dir.

The embedded default runs the web server and the task worker as two processes on one machine
(`manage.py up`); the worker publishes a run's events to the group `run-<id>` and the web
server's consumers relay them. Redis does this when `REDIS_URL` is set; without a broker, this
layer does it through a SQLite file of its own (WAL mode, so readers never wait for writers):

- `group_send` delivers at once to the members in its own process, and appends one row for the
  group, whoever its members are.
- Each process that has members polls for rows newer than the last it has seen (one indexed
  read every `poll_interval`, 10 ms by default: the live latency target is a p95 under 50 ms)
  and hands the rows of its groups to its members. Rows of groups it has no members in are
  skipped; nothing is written to read, so a hundred idle pages cost a hundred cheap reads a
  second and no locks.
- `send` to a process-specific channel of another process goes through the file the same way;
  to a normal channel, the first `receive` to claim the row gets it.
- Rows older than `expiry` seconds are deleted by the senders, at most once a second.

Groups hold process-specific channels (what Channels' consumers add), kept in memory by the
process that owns them. Messages are JSON. The file lives beside the database, independent of
`DATABASE_URL`: this is a single-machine layer; across machines, use Redis.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS channel_message (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    target TEXT NOT NULL,
    is_group INTEGER NOT NULL,
    origin TEXT NOT NULL,
    body TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS channel_message_created ON channel_message (created);
CREATE INDEX IF NOT EXISTS channel_message_target ON channel_message (target, is_group, id);
"""
# How many rows one poll reads at most; the next poll goes on from there.
POLL_BATCH = 500
# A poller with nobody to deliver to stops after this long (and restarts when needed).
IDLE_STOP_SECONDS = 5.0
PRUNE_EVERY_SECONDS = 1.0


class SQLiteChannelLayer(BaseChannelLayer):  # type: ignore[misc]
    extensions = ["groups", "flush"]

    def __init__(
        self,
        path: str,
        *,
        expiry: int = 60,
        group_expiry: int = 86400,
        capacity: int = 100,
        channel_capacity: dict[str, int] | None = None,
        poll_interval: float = 0.01,
    ) -> None:
        super().__init__(expiry=expiry, capacity=capacity, channel_capacity=channel_capacity)
        self.path = Path(path)
        self.group_expiry = group_expiry
        self.poll_interval = poll_interval
        # Process-specific channels of this layer start with this.
        self.client_prefix = uuid.uuid4().hex
        self._queues: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self._groups: dict[str, set[str]] = defaultdict(set)
        self._receiving = 0
        self._poller: asyncio.Task[None] | None = None
        self._last_id = 0
        self._last_prune = 0.0
        # Every statement runs on one thread with one connection: SQLite connections are not
        # to be shared between threads, and one writer per process is all this needs.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="channel-layer")
        self._local = threading.local()

    # ---- the database, on the layer's own thread ------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=20, isolation_level=None)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.executescript(SCHEMA)
            self._local.connection = connection
        return connection

    async def _db(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: operation(self._connection()))

    async def _write(self, target: str, is_group: bool, message: dict[str, Any]) -> None:
        body = json.dumps(message, separators=(",", ":"))
        now = time.time()

        def insert(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT INTO channel_message (target, is_group, origin, body, created) "
                "VALUES (?, ?, ?, ?, ?)",
                (target, int(is_group), self.client_prefix, body, now),
            )
            if now - self._last_prune >= PRUNE_EVERY_SECONDS:
                self._last_prune = now
                connection.execute(
                    "DELETE FROM channel_message WHERE created < ?", (now - self.expiry,)
                )

        await self._db(insert)

    # ---- the channel layer API ----------------------------------------------------------------

    async def new_channel(self, prefix: str = "specific") -> str:
        return f"{prefix}.{self.client_prefix}!{uuid.uuid4().hex}"

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        if self._is_mine(channel):
            queue = self._queue(channel)
            if queue.full():
                raise ChannelFull(channel)
            queue.put_nowait(message)
            return
        await self._write(channel, False, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        self.require_valid_channel_name(channel)
        if "!" in channel:
            assert self._is_mine(channel), "Wrong client prefix"
            await self._ensure_poller()
            self._receiving += 1
            try:
                return await self._queue(channel).get()
            finally:
                self._receiving -= 1
        while True:
            message = await self._db(lambda connection: _claim(connection, channel))
            if message is not None:
                return message
            await asyncio.sleep(self.poll_interval)

    async def group_add(self, group: str, channel: str) -> None:
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        if not self._is_mine(channel):
            raise ValueError(
                f"{type(self).__name__} groups hold the process-specific channels of this "
                f"process; {channel!r} is not one"
            )
        await self._ensure_poller()
        self._groups[group].add(channel)

    async def group_discard(self, group: str, channel: str) -> None:
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        members = self._groups.get(group)
        if members is not None:
            members.discard(channel)
            if not members:
                del self._groups[group]
        if not any(channel in members for members in self._groups.values()):
            self._queues.pop(channel, None)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        self._deliver_to_group(group, message)
        await self._write(group, True, message)

    async def flush(self) -> None:
        await self._db(lambda connection: connection.execute("DELETE FROM channel_message"))
        self._queues.clear()
        self._groups.clear()

    async def close(self) -> None:
        if self._poller is not None and not self._poller.done():
            self._poller.cancel()
        self._poller = None

    # ---- delivery -----------------------------------------------------------------------------

    def _is_mine(self, channel: str) -> bool:
        return "!" in channel and channel.split("!", 1)[0].endswith(self.client_prefix)

    def _queue(self, channel: str) -> asyncio.Queue[dict[str, Any]]:
        queue = self._queues.get(channel)
        if queue is None:
            queue = self._queues[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        return queue

    def _deliver_to_group(self, group: str, message: dict[str, Any]) -> None:
        for channel in list(self._groups.get(group, ())):
            queue = self._queue(channel)
            if not queue.full():  # a full channel drops group messages (the spec's rule)
                queue.put_nowait(dict(message))

    async def _ensure_poller(self) -> None:
        loop = asyncio.get_running_loop()
        poller = self._poller
        if poller is not None and not poller.done() and poller.get_loop() is loop:
            return
        # Start from now: what was sent before a member joined is not for it.
        self._last_id = await self._db(_max_id)
        self._poller = loop.create_task(self._poll(), name="sqlite-channel-layer-poller")

    async def _poll(self) -> None:
        idle_since: float | None = None
        while True:
            if self._groups or self._receiving:
                idle_since = None
            else:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > IDLE_STOP_SECONDS:
                    return
            rows = await self._db(lambda connection: _rows_after(connection, self._last_id))
            for row_id, target, is_group, origin, body in rows:
                self._last_id = row_id
                if is_group:
                    if origin != self.client_prefix and target in self._groups:
                        self._deliver_to_group(target, json.loads(body))
                elif self._is_mine(target):
                    queue = self._queue(target)
                    if not queue.full():
                        queue.put_nowait(json.loads(body))
            if len(rows) < POLL_BATCH:
                await asyncio.sleep(self.poll_interval)


def _max_id(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT COALESCE(MAX(id), 0) FROM channel_message").fetchone()
    return int(row[0])


def _rows_after(connection: sqlite3.Connection, last_id: int) -> list[tuple[Any, ...]]:
    return connection.execute(
        "SELECT id, target, is_group, origin, body FROM channel_message "
        "WHERE id > ? ORDER BY id LIMIT ?",
        (last_id, POLL_BATCH),
    ).fetchall()


def _claim(connection: sqlite3.Connection, channel: str) -> dict[str, Any] | None:
    """Take the oldest message of a normal channel, so that one receiver alone gets it."""
    row = connection.execute(
        "DELETE FROM channel_message WHERE id = ("
        "SELECT id FROM channel_message WHERE target = ? AND is_group = 0 "
        "ORDER BY id LIMIT 1) RETURNING body",
        (channel,),
    ).fetchone()
    return json.loads(row[0]) if row else None
