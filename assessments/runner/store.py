"""The agent's ConversationStore on the ORM: a run's messages and events, saved as they happen.

The agent calls it synchronously from inside its asyncio loop, where the ORM must not run;
the seam (`assessments/runner/__init__.py`) therefore hands each call to a thread of its own
(see `_ThreadedStore` there). This class is the plain, synchronous mapping:

- an agent Conversation is a `Conversation` row whose primary key is the conversation id (a
  UUID, the run's id); its metadata is the row's `metadata`, and the provider, model, trace id
  and token totals it carries are copied into the row's columns for the pages;
- an agent Message is a `Message` row at the next position; what the row has no column for
  (the tool's name, the error flag) goes into its metadata under `tool_name` / `is_error`;
- an agent event is an `AgentEvent` row numbered 1, 2, 3... (`run_services.append_event`), its
  payload the event's JSON.

It satisfies `agent.store.ConversationStore`; `store_test.py` runs the agent's contract
against it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Max, OuterRef, Subquery
from django.db.models.functions import Coalesce, Greatest

from agent.events import AgentEvent, dump_event, parse_event
from agent.messages import Conversation as AgentConversation
from agent.messages import Message as AgentMessage
from agent.messages import ToolCall
from agent.store import ConversationNotFoundError, ConversationSummary, StoredEvent, summarise
from assessments import services as run_services
from releases.models import AgentEvent as EventRow
from releases.models import Conversation
from releases.models import Message as MessageRow

# Message metadata keys that hold agent Message fields the row has no column for.
_TOOL_NAME = "tool_name"
_IS_ERROR = "is_error"

logger = logging.getLogger(__name__)


@dataclass
class BatchCursor:
    """Where a conversation's only writer has got to: its last message position and event
    number (None until `append_batch` has read them)."""

    position: int | None = None
    seq: int = 0


def _pk(conversation_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(conversation_id))
    except ValueError:
        raise ConversationNotFoundError(f"No conversation {conversation_id!r}") from None


class OrmConversationStore:
    """Conversations in the database. Ids are UUIDs: the run's id.

    `on_saved` is called with each event once it is saved (the runner publishes it).

    Each write is one transaction; called inside a caller's transaction (the evals'
    write-behind batches), it joins it without a savepoint: a failed write fails the whole
    batch, and none of the callers carries on after one.
    """

    def __init__(self, on_saved: Callable[[EventRow], None] | None = None) -> None:
        self._on_saved = on_saved

    def create(self, conversation: AgentConversation) -> None:
        pk = _pk(conversation.id)
        with transaction.atomic(savepoint=False):
            row, created = Conversation.objects.get_or_create(
                pk=pk,
                defaults={
                    "system_prompt": conversation.system_prompt,
                    "created_at": conversation.created_at,
                    "metadata": dict(conversation.metadata),
                    **_columns(conversation.metadata),
                },
            )
            if not created:
                # A run is created by the web request that queued it; the agent fills it in.
                if not row.system_prompt and conversation.system_prompt:
                    row.system_prompt = conversation.system_prompt
                    row.save(update_fields=["system_prompt"])
                return
            for message in conversation.messages:
                run_services.append_message(row, **_message_fields(message))

    def append_message(self, conversation_id: str, message: AgentMessage) -> None:
        run_services.append_message(self._row(conversation_id), **_message_fields(message))

    def append_event(self, conversation_id: str, event: AgentEvent) -> int:
        try:
            saved = run_services.append_event(
                self._row(conversation_id),
                kind=event.kind,
                payload=dump_event(event),
                created_at=event.timestamp,
            )
        except run_services.RunEnded as ended:
            # Someone else ended the run (the sweep failed it while this worker was paused):
            # their verdict stands, and this worker's late events are dropped.
            logger.warning("run %s: %s; dropped a %s event", conversation_id, ended, event.kind)
            return ended.seq
        if self._on_saved is not None:
            self._on_saved(saved)
        return saved.seq

    def append_batch(
        self,
        conversation_id: str,
        items: Sequence[AgentMessage | AgentEvent],
        cursor: BatchCursor | None = None,
    ) -> None:
        """Append several messages and events at once, in order: what `append_message` and
        `append_event` do one by one, in a handful of queries (the evals store the work of
        many agents at once).

        A writer that is the conversation's only one passes the same `cursor` every time:
        the last position and number are then read once, not locked and read again for
        every batch (two inserts a batch instead of five queries)."""
        if not items:
            return
        pk = _pk(conversation_id)
        with transaction.atomic(savepoint=False):
            if cursor is None or cursor.position is None:
                # Locked, as services.append_* lock it: the numbers below stay ours.
                row = Conversation.objects.select_for_update().filter(pk=pk).first()
                if row is None:
                    raise ConversationNotFoundError(f"No conversation {conversation_id!r}")
                last = row.messages.aggregate(last=Max("position"))["last"]
                position = -1 if last is None else last
                seq = row.events.aggregate(last=Max("seq"))["last"] or 0
            else:
                position, seq = cursor.position, cursor.seq
            messages, events = [], []
            for item in items:
                if isinstance(item, AgentMessage):
                    position += 1
                    messages.append(
                        MessageRow(conversation_id=pk, position=position, **_message_fields(item))
                    )
                else:
                    seq += 1
                    events.append(
                        EventRow(
                            conversation_id=pk,
                            seq=seq,
                            kind=item.kind,
                            payload=dump_event(item),
                            created_at=item.timestamp,
                        )
                    )
            MessageRow.objects.bulk_create(messages)
            EventRow.objects.bulk_create(events)
        if cursor is not None:
            # Only once the rows are in: a batch that failed leaves the cursor where it was.
            cursor.position, cursor.seq = position, seq
        if self._on_saved is not None:
            for event in events:
                self._on_saved(event)

    def load(self, conversation_id: str) -> AgentConversation:
        row = self._row(conversation_id)
        return AgentConversation(
            id=str(row.pk),
            system_prompt=row.system_prompt,
            created_at=row.created_at,
            metadata=dict(row.metadata),
            messages=[_agent_message(m) for m in row.messages.order_by("position")],
        )

    def load_events(self, conversation_id: str, after: int = 0) -> list[StoredEvent]:
        row = self._row(conversation_id)
        events = EventRow.objects.filter(conversation=row, seq__gt=after).order_by("seq")
        return [StoredEvent(seq=e.seq, event=parse_event(e.payload)) for e in events]

    def list(self) -> list[ConversationSummary]:
        first_user = (
            MessageRow.objects.filter(conversation=OuterRef("pk"), role="user")
            .order_by("position")
            .values("content")[:1]
        )
        rows = Conversation.objects.annotate(
            updated=Greatest("created_at", Coalesce(Max("messages__created_at"), "created_at")),
            message_count=Coalesce(Max("messages__position"), -1) + 1,
            first_user=Subquery(first_user),
        ).order_by("-updated", "-created_at")
        summaries = []
        for row in rows:
            stand_in = AgentConversation(
                id=str(row.pk),
                created_at=row.created_at,
                metadata=dict(row.metadata),
                messages=[AgentMessage.user(row.first_user)] if row.first_user else [],
            )
            summary = summarise(stand_in, row.updated)
            summaries.append(summary.model_copy(update={"message_count": row.message_count}))
        return summaries

    def update_metadata(self, conversation_id: str, **metadata: Any) -> None:
        pk = _pk(conversation_id)
        with transaction.atomic(savepoint=False):
            # Locked: Cancel and the sweep write to the same row.
            row = Conversation.objects.select_for_update().filter(pk=pk).first()
            if row is None:
                raise ConversationNotFoundError(f"No conversation {conversation_id!r}")
            row.metadata = {**row.metadata, **metadata}
            columns = _columns(row.metadata)
            for name, value in columns.items():
                setattr(row, name, value)
            row.save(update_fields=["metadata", *columns])

    def _row(self, conversation_id: str) -> Conversation:
        row = Conversation.objects.filter(pk=_pk(conversation_id)).first()
        if row is None:
            raise ConversationNotFoundError(f"No conversation {conversation_id!r}")
        return row


def _columns(metadata: dict[str, Any]) -> dict[str, Any]:
    """The row's columns that mirror the agent's metadata (for lists and filters)."""
    columns: dict[str, Any] = {}
    for key in ("provider", "model", "trace_id"):
        if isinstance(metadata.get(key), str) and metadata[key]:
            columns[key] = metadata[key][: Conversation._meta.get_field(key).max_length]
    usage = metadata.get("usage")
    if isinstance(usage, dict):
        columns["input_tokens"] = int(usage.get("input_tokens") or 0)
        columns["output_tokens"] = int(usage.get("output_tokens") or 0)
    cost = metadata.get("estimated_cost_usd")
    if isinstance(cost, int | float):
        columns["estimated_cost"] = Decimal(str(round(cost, 6)))
    return columns


def _message_fields(message: AgentMessage) -> dict[str, Any]:
    metadata = dict(message.metadata)
    if message.name is not None:
        metadata[_TOOL_NAME] = message.name
    if message.is_error:
        metadata[_IS_ERROR] = True
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [call.model_dump(mode="json") for call in message.tool_calls],
        "tool_call_id": message.tool_call_id or "",
        "metadata": metadata,
        "created_at": message.timestamp,
    }


def _agent_message(row: MessageRow) -> AgentMessage:
    metadata = dict(row.metadata)
    name = metadata.pop(_TOOL_NAME, None)
    is_error = bool(metadata.pop(_IS_ERROR, False))
    return AgentMessage(
        role=row.role,  # type: ignore[arg-type]
        content=row.content,
        tool_calls=[ToolCall.model_validate(call) for call in row.tool_calls],
        tool_call_id=row.tool_call_id or None,
        name=name,
        is_error=is_error,
        timestamp=row.created_at,
        metadata=metadata,
    )
