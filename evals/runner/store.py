"""Where a trial's agent writes: a write-behind store on one of the run's database threads.

Trials share one event loop; the agent calls its store synchronously from inside it. Each call
is queued for the database thread the trial was given (a run has a few, shared in turn) and
returns at once, so no trial waits on the database while others talk to the model; a trial's
writes stay in order, and it reads its record back only once they are done.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import connections, transaction

from agent.events import AgentEvent, TextDelta
from agent.messages import Conversation as AgentConversation
from agent.messages import Message as AgentMessage
from agent.store import ConversationSummary, StoredEvent
from assessments.runner.store import BatchCursor, OrmConversationStore

logger = logging.getLogger(__name__)

T = TypeVar("T")


class EvalInfrastructureError(RuntimeError):
    """The harness failed (database, in-process API...), not the agent or the provider."""


class DbThread:
    """A thread where ORM work runs in order, on the thread's own connection."""

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def submit(self, call: Callable[[], T]) -> Future[T]:
        return self._executor.submit(call)

    async def run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.wrap_future(self._executor.submit(call, *args, **kwargs))

    async def close(self) -> None:
        try:
            await self.run(connections.close_all)
        finally:
            self._executor.shutdown(wait=False)


class DbThreads:
    """The run's database threads. Each trial is given one, in turn, and all its ORM work
    runs there, in order. A few threads rather than one per trial: they keep their
    connections from trial to trial, and twenty threads woken at once only fought for the
    GIL (SQLite takes one writer at a time anyway)."""

    def __init__(self, count: int) -> None:
        self._threads = [DbThread(f"evals-db-{index}") for index in range(max(1, count))]
        self._turn = itertools.cycle(self._threads)

    def take(self) -> DbThread:
        return next(self._turn)

    async def close(self) -> None:
        for thread in self._threads:
            await thread.close()


class WriteBehindStore:
    """The ORM store for an agent in a shared event loop: writes are queued for the trial's
    database thread and return at once; what queued up meanwhile is saved in one transaction, the
    messages and events of it in one `append_batch`. The event numbers are counted here: the
    trial's Conversation is written by this store alone.

    Consecutive text deltas of one step are saved as one event (the same text, in fewer
    rows): nobody watches a trial's words arrive, and a model streams many small pieces."""

    def __init__(self, store: OrmConversationStore, db: DbThread, conversation_id: str) -> None:
        self._store = store
        self._conversation_id = conversation_id
        self._db = db
        self._lock = threading.Lock()
        # Messages and events to append, or other writes to make, in order.
        self._pending: deque[AgentMessage | AgentEvent | Callable[[], object]] = deque()
        self._scheduled = False
        self._seq = 0
        self._text: TextDelta | None = None
        self._error: BaseException | None = None
        # This store is the trial's only writer: its batches need not re-read the numbers.
        self._cursor = BatchCursor()

    def _put(self, write: AgentMessage | AgentEvent | Callable[[], object]) -> None:
        with self._lock:
            self._pending.append(write)
            if self._scheduled:
                return
            self._scheduled = True
        self._db.submit(self._drain)

    def _drain(self) -> None:
        with self._lock:
            batch = list(self._pending)
            self._pending.clear()
            self._scheduled = False
        if self._error is not None:
            return  # the record is broken already; the trial will say so
        try:
            with transaction.atomic():
                appends: list[AgentMessage | AgentEvent] = []
                for write in batch:
                    if not callable(write):  # a message or an event
                        appends.append(write)
                        continue
                    self._store.append_batch(self._conversation_id, appends, self._cursor)
                    appends = []
                    write()
                self._store.append_batch(self._conversation_id, appends, self._cursor)
        except BaseException as exc:
            logger.exception("could not save a trial's messages or events")
            self._error = exc

    def _put_text(self) -> None:
        if self._text is not None:
            self._put(self._text)
            self._text = None

    async def flush(self) -> None:
        """Wait until every queued write is saved; raise if one failed."""
        self._put_text()
        await self._db.run(lambda: None)
        if self._error is not None:
            raise EvalInfrastructureError(
                f"saving the trial failed: {type(self._error).__name__}: {self._error}"
            ) from self._error

    # -- ConversationStore --

    def create(self, conversation: AgentConversation) -> None:
        snapshot = conversation.model_copy(deep=True)
        self._put(lambda: self._store.create(snapshot))

    def append_message(self, conversation_id: str, message: AgentMessage) -> None:
        self._put_text()
        self._put(message)

    def append_event(self, conversation_id: str, event: AgentEvent) -> int:
        if isinstance(event, TextDelta):
            if self._text is not None and self._text.step == event.step:
                self._text = self._text.model_copy(update={"text": self._text.text + event.text})
                return self._seq
            self._put_text()
            self._text = event
        else:
            self._put_text()
            self._put(event)
        self._seq += 1
        return self._seq

    def update_metadata(self, conversation_id: str, **metadata: Any) -> None:
        self._put_text()
        snapshot = dict(metadata)
        self._put(lambda: self._store.update_metadata(conversation_id, **snapshot))

    # Reads are not used while a run goes on; they wait for the writes before them.
    def load(self, conversation_id: str) -> AgentConversation:
        return self._db.submit(lambda: self._store.load(conversation_id)).result()

    def load_events(self, conversation_id: str, after: int = 0) -> list[StoredEvent]:
        return self._db.submit(lambda: self._store.load_events(conversation_id, after)).result()

    def list(self) -> list[ConversationSummary]:
        return self._db.submit(self._store.list).result()
