"""Where conversations and their events are saved as a run goes on.

The loop saves every message and every event through a `ConversationStore` before it
hands the event to its caller, so whatever a screen shows can be rebuilt from the store.
Two stores live here: `JsonFileStore` for the command line (one JSON file per
conversation, plus a JSONL session log of its events beside it) and `InMemoryStore` for
tests and benchmarks. The Django side implements the same protocol with its ORM;
`store_contract_test.ConversationStoreContract` is the test suite every store must pass.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from agent.errors import AgentError
from agent.events import AgentEvent, dump_event, parse_event
from agent.messages import Conversation, Message, utcnow


class ConversationNotFoundError(AgentError, LookupError):
    """No conversation with this id in the store."""


class ConversationSummary(BaseModel):
    """One line of a conversation list."""

    model_config = ConfigDict(frozen=True)

    id: str
    created_at: datetime
    updated_at: datetime
    message_count: int
    title: str = ""  # the start of the first user message
    metadata: dict[str, Any] = {}


class StoredEvent(BaseModel):
    """An event with its sequence number within its conversation (1, 2, 3...)."""

    model_config = ConfigDict(frozen=True)

    seq: int
    event: AgentEvent


@runtime_checkable
class ConversationStore(Protocol):
    def create(self, conversation: Conversation) -> None:
        """Save a conversation that is not stored yet, with the messages and metadata it
        holds. Does nothing when the id is already stored, so callers may repeat it."""
        ...

    def append_message(self, conversation_id: str, message: Message) -> None: ...

    def append_event(self, conversation_id: str, event: AgentEvent) -> int:
        """Save an event; return its sequence number (1 for the first event of the
        conversation, then 2, 3...)."""
        ...

    def load(self, conversation_id: str) -> Conversation:
        """Raises ConversationNotFoundError for an unknown id."""
        ...

    def load_events(self, conversation_id: str, after: int = 0) -> list[StoredEvent]:
        """The events whose sequence number is greater than `after`, in order (for a
        page that replays what it missed)."""
        ...

    def list(self) -> list[ConversationSummary]:
        """Every conversation, the most recently updated first."""
        ...

    def update_metadata(self, conversation_id: str, **metadata: Any) -> None:
        """Merge these keys into the conversation's metadata."""
        ...


def summarise(conversation: Conversation, updated_at: datetime) -> ConversationSummary:
    first_user = next((m for m in conversation.messages if m.role == "user"), None)
    title = first_user.content.strip().splitlines()[0][:80] if first_user else ""
    return ConversationSummary(
        id=conversation.id,
        created_at=conversation.created_at,
        updated_at=updated_at,
        message_count=len(conversation.messages),
        title=title,
        metadata=dict(conversation.metadata),
    )


class InMemoryStore:
    """Keeps everything in dictionaries; for tests and benchmarks."""

    def __init__(self) -> None:
        self._conversations: dict[str, Conversation] = {}
        self._events: dict[str, list[StoredEvent]] = {}
        self._updated: dict[str, datetime] = {}

    def create(self, conversation: Conversation) -> None:
        if conversation.id in self._conversations:
            return
        self._conversations[conversation.id] = conversation.model_copy(deep=True)
        self._events[conversation.id] = []
        self._updated[conversation.id] = utcnow()

    def append_message(self, conversation_id: str, message: Message) -> None:
        self._get(conversation_id).messages.append(message)
        self._updated[conversation_id] = utcnow()

    def append_event(self, conversation_id: str, event: AgentEvent) -> int:
        self._get(conversation_id)
        events = self._events[conversation_id]
        events.append(StoredEvent(seq=len(events) + 1, event=event))
        return len(events)

    def load(self, conversation_id: str) -> Conversation:
        return self._get(conversation_id).model_copy(deep=True)

    def load_events(self, conversation_id: str, after: int = 0) -> list[StoredEvent]:
        self._get(conversation_id)
        return [e for e in self._events[conversation_id] if e.seq > after]

    def list(self) -> list[ConversationSummary]:
        summaries = [summarise(c, self._updated[c.id]) for c in self._conversations.values()]
        return sorted(summaries, key=lambda s: (s.updated_at, s.created_at), reverse=True)

    def update_metadata(self, conversation_id: str, **metadata: Any) -> None:
        self._get(conversation_id).metadata.update(metadata)
        self._updated[conversation_id] = utcnow()

    def _get(self, conversation_id: str) -> Conversation:
        try:
            return self._conversations[conversation_id]
        except KeyError:
            raise ConversationNotFoundError(f"No conversation {conversation_id!r}") from None


# Ids become file names: nothing that could climb out of the directory.
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$")


class JsonFileStore:
    """One `<id>.json` file per conversation and a `<id>.events.jsonl` session log.

    The conversation file is rewritten whole on every change, through a temporary file
    and an atomic rename, so a crash leaves the previous version rather than half a file.
    The session log is append-only, one event per line with its sequence number, flushed
    as each event happens. One process owns a conversation at a time (the CLI).
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._cache: dict[str, Conversation] = {}
        self._seq: dict[str, int] = {}

    def conversation_path(self, conversation_id: str) -> Path:
        return self.directory / f"{_checked(conversation_id)}.json"

    def events_path(self, conversation_id: str) -> Path:
        return self.directory / f"{_checked(conversation_id)}.events.jsonl"

    def create(self, conversation: Conversation) -> None:
        if self.conversation_path(conversation.id).exists():
            return
        stored = conversation.model_copy(deep=True)
        self._write(stored)
        self._cache[stored.id] = stored

    def append_message(self, conversation_id: str, message: Message) -> None:
        conversation = self._get(conversation_id)
        conversation.messages.append(message)
        self._write(conversation)

    def append_event(self, conversation_id: str, event: AgentEvent) -> int:
        self._get(conversation_id)
        seq = self._next_seq(conversation_id)
        line = json.dumps({"seq": seq, "event": dump_event(event)}, ensure_ascii=False)
        with self.events_path(conversation_id).open("a", encoding="utf-8") as log:
            log.write(line + "\n")
        self._seq[conversation_id] = seq
        return seq

    def load(self, conversation_id: str) -> Conversation:
        return self._get(conversation_id).model_copy(deep=True)

    def load_events(self, conversation_id: str, after: int = 0) -> list[StoredEvent]:
        self._get(conversation_id)
        events = []
        for line in self._event_lines(conversation_id):
            data = json.loads(line)
            if data["seq"] > after:
                events.append(StoredEvent(seq=data["seq"], event=parse_event(data["event"])))
        return events

    def list(self) -> list[ConversationSummary]:
        summaries = []
        for path in self.directory.glob("*.json"):
            try:
                conversation = self._get(path.stem)
            except (ConversationNotFoundError, ValueError):
                continue  # not a conversation file, or an unreadable one
            updated = datetime.fromtimestamp(path.stat().st_mtime).astimezone()
            summaries.append(summarise(conversation, updated))
        # File times are coarse (a few milliseconds): ties go to the newer conversation.
        return sorted(summaries, key=lambda s: (s.updated_at, s.created_at), reverse=True)

    def update_metadata(self, conversation_id: str, **metadata: Any) -> None:
        conversation = self._get(conversation_id)
        conversation.metadata.update(metadata)
        self._write(conversation)

    def _get(self, conversation_id: str) -> Conversation:
        if conversation_id in self._cache:
            return self._cache[conversation_id]
        path = self.conversation_path(conversation_id)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConversationNotFoundError(
                f"No conversation {conversation_id!r} in {self.directory}"
            ) from None
        conversation = Conversation.model_validate_json(text)
        self._cache[conversation_id] = conversation
        return conversation

    def _write(self, conversation: Conversation) -> None:
        path = self.conversation_path(conversation.id)
        data = conversation.model_dump_json(indent=2)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _next_seq(self, conversation_id: str) -> int:
        if conversation_id not in self._seq:
            self._seq[conversation_id] = sum(1 for _ in self._event_lines(conversation_id))
        return self._seq[conversation_id] + 1

    def _event_lines(self, conversation_id: str) -> list[str]:
        path = self.events_path(conversation_id)
        if not path.exists():
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
        return [line for line in lines if line.strip()]


def _checked(conversation_id: str) -> str:
    if not _SAFE_ID.match(conversation_id) or ".." in conversation_id:
        raise ConversationNotFoundError(f"Invalid conversation id {conversation_id!r}")
    return conversation_id
