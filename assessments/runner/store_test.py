"""The ORM store passes the agent's ConversationStore contract."""

from __future__ import annotations

import uuid

import pytest
from django.db import IntegrityError

from agent.events import TextDelta
from agent.messages import Conversation as AgentConversation
from agent.messages import Message
from agent.store_contract_test import ConversationStoreContract
from assessments.runner.store import BatchCursor, OrmConversationStore
from releases.models import Conversation

pytestmark = pytest.mark.django_db


class TestOrmConversationStore(ConversationStoreContract):
    @pytest.fixture
    def store(self) -> OrmConversationStore:
        return OrmConversationStore()

    def make_conversation(self, **metadata: object) -> AgentConversation:
        # The store's ids are the runs' ids: UUIDs.
        return AgentConversation(
            id=str(uuid.uuid4()), system_prompt="You are the Detective.", metadata=dict(metadata)
        )


def test_the_row_mirrors_what_the_pages_show() -> None:
    store = OrmConversationStore()
    conversation = AgentConversation(id=str(uuid.uuid4()), metadata={"provider": "anthropic"})
    store.create(conversation)
    store.update_metadata(
        conversation.id,
        model="claude-sonnet-4-5",
        trace_id="ab" * 16,
        usage={"input_tokens": 1200, "output_tokens": 80},
        estimated_cost_usd=0.0048,
    )
    row = Conversation.objects.get(pk=conversation.id)
    assert (row.provider, row.model, row.trace_id) == ("anthropic", "claude-sonnet-4-5", "ab" * 16)
    assert (row.input_tokens, row.output_tokens) == (1200, 80)
    assert str(row.estimated_cost) == "0.004800"


def test_a_tool_message_keeps_its_name_and_error_flag() -> None:
    store = OrmConversationStore()
    conversation = AgentConversation(id=str(uuid.uuid4()))
    store.create(conversation)
    failed = Message(role="tool", content="boom", tool_call_id="c1", name="t", is_error=True)
    store.append_message(conversation.id, failed)
    assert store.load(conversation.id).messages == [failed]


def test_saved_events_are_handed_on_in_order() -> None:
    saved = []
    store = OrmConversationStore(on_saved=saved.append)
    conversation = AgentConversation(id=str(uuid.uuid4()))
    store.create(conversation)
    for text in ("a", "b"):
        store.append_event(conversation.id, TextDelta(step=1, text=text))
    assert [(event.seq, event.payload["text"]) for event in saved] == [(1, "a"), (2, "b")]


def test_a_batch_is_saved_as_one_by_one_appends_would_save_it(
    django_assert_max_num_queries: object,
) -> None:
    saved = []
    store = OrmConversationStore(on_saved=saved.append)
    conversation = AgentConversation(id=str(uuid.uuid4()))
    store.create(conversation)
    store.append_message(conversation.id, Message.user("Assess v1"))
    store.append_event(conversation.id, TextDelta(step=1, text="a"))
    batch = [
        TextDelta(step=1, text="b"),
        Message.assistant("Looking."),
        TextDelta(step=2, text="c"),
        Message(role="tool", content="boom", tool_call_id="c1", name="t", is_error=True),
    ]
    # The row lock, the last position and number, two inserts; a savepoint around them.
    with django_assert_max_num_queries(7):  # type: ignore[operator]
        store.append_batch(conversation.id, batch)
    store.append_batch(conversation.id, [])
    assert [m.content for m in store.load(conversation.id).messages] == [
        "Assess v1",
        "Looking.",
        "boom",
    ]
    assert store.load(conversation.id).messages[-1].is_error
    events = store.load_events(conversation.id)
    assert [(e.seq, e.event.text) for e in events] == [(1, "a"), (2, "b"), (3, "c")]  # type: ignore[union-attr]
    assert [event.seq for event in saved] == [1, 2, 3]


def test_a_sole_writer_s_cursor_reads_the_numbers_once(
    django_assert_num_queries: object,
) -> None:
    store = OrmConversationStore()
    conversation = AgentConversation(id=str(uuid.uuid4()))
    store.create(conversation)
    store.append_message(conversation.id, Message.user("Assess v1"))
    store.append_event(conversation.id, TextDelta(step=1, text="a"))
    cursor = BatchCursor()
    store.append_batch(
        conversation.id, [Message.assistant("one"), TextDelta(step=2, text="b")], cursor
    )
    assert (cursor.position, cursor.seq) == (1, 2)
    # From now on: the two inserts, no lock, no MAX(), and no savepoint inside the test's
    # transaction.
    with django_assert_num_queries(2):  # type: ignore[operator]
        store.append_batch(
            conversation.id, [Message.assistant("two"), TextDelta(step=3, text="c")], cursor
        )
    assert (cursor.position, cursor.seq) == (2, 3)
    loaded = store.load(conversation.id)
    assert [m.content for m in loaded.messages] == ["Assess v1", "one", "two"]
    assert [e.seq for e in store.load_events(conversation.id)] == [1, 2, 3]


def test_a_failed_batch_leaves_the_cursor_where_it_was() -> None:
    store = OrmConversationStore()
    conversation = AgentConversation(id=str(uuid.uuid4()))
    store.create(conversation)
    cursor = BatchCursor()
    store.append_batch(conversation.id, [Message.user("Assess v1")], cursor)
    duplicate = BatchCursor(position=-1, seq=0)  # claims position 0 again
    with pytest.raises(IntegrityError):
        store.append_batch(conversation.id, [Message.assistant("clash")], duplicate)
    assert (duplicate.position, duplicate.seq) == (-1, 0)
    assert (cursor.position, cursor.seq) == (0, 0)
