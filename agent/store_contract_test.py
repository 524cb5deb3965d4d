"""The contract every ConversationStore passes, run here against the two stores of
`agent.store`. The Django ORM store reuses it: subclass `ConversationStoreContract` in a
Test class and provide a `store` fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.events import RunStarted, TextDelta, ToolCallRequested
from agent.messages import Conversation, Message, ToolCall
from agent.store import (
    ConversationNotFoundError,
    ConversationStore,
    InMemoryStore,
    JsonFileStore,
)


class ConversationStoreContract:
    """Tests any ConversationStore must pass; subclasses provide a `store` fixture."""

    def make_conversation(self, **metadata: object) -> Conversation:
        return Conversation(system_prompt="You are the Detective.", metadata=dict(metadata))

    def test_is_a_conversation_store(self, store: ConversationStore) -> None:
        assert isinstance(store, ConversationStore)

    def test_create_then_load_round_trips(self, store: ConversationStore) -> None:
        conversation = self.make_conversation(provider="ollama", model="qwen2.5:1.5b")
        conversation.messages.append(Message.user("hello"))
        store.create(conversation)
        loaded = store.load(conversation.id)
        assert loaded == conversation
        assert loaded is not conversation

    def test_create_is_idempotent(self, store: ConversationStore) -> None:
        conversation = self.make_conversation()
        store.create(conversation)
        store.append_message(conversation.id, Message.user("kept"))
        store.create(conversation)
        assert [m.content for m in store.load(conversation.id).messages] == ["kept"]

    def test_messages_keep_their_order_and_content(self, store: ConversationStore) -> None:
        conversation = self.make_conversation()
        store.create(conversation)
        call = ToolCall(id="c1", name="get_release_summary", arguments={"release_id": "v1"})
        messages = [
            Message.user("Assess v1"),
            Message.assistant("Fetching.", [call], step=1),
            Message(role="tool", content='{"ok": true}', tool_call_id="c1", name=call.name),
        ]
        for message in messages:
            store.append_message(conversation.id, message)
        assert store.load(conversation.id).messages == messages

    def test_events_are_numbered_per_conversation(self, store: ConversationStore) -> None:
        first, second = self.make_conversation(), self.make_conversation()
        store.create(first)
        store.create(second)
        started = RunStarted(conversation_id=first.id, provider="p", model="m")
        delta = TextDelta(step=1, text="hi")
        call = ToolCallRequested(step=1, tool_call=ToolCall(id="c", name="t", arguments={}))
        assert store.append_event(first.id, started) == 1
        assert store.append_event(first.id, delta) == 2
        assert store.append_event(second.id, delta) == 1
        assert store.append_event(first.id, call) == 3
        stored = store.load_events(first.id)
        assert [(s.seq, s.event) for s in stored] == [(1, started), (2, delta), (3, call)]
        assert [s.seq for s in store.load_events(first.id, after=2)] == [3]
        assert store.load_events(second.id)[0].event == delta

    def test_update_metadata_merges(self, store: ConversationStore) -> None:
        conversation = self.make_conversation(provider="anthropic")
        store.create(conversation)
        store.update_metadata(conversation.id, trace_id="abc", usage={"input_tokens": 3})
        store.update_metadata(conversation.id, trace_id="def")
        assert store.load(conversation.id).metadata == {
            "provider": "anthropic",
            "trace_id": "def",
            "usage": {"input_tokens": 3},
        }

    def test_list_summarises_the_most_recent_first(self, store: ConversationStore) -> None:
        older, newer = self.make_conversation(), self.make_conversation(model="m")
        store.create(older)
        store.append_message(older.id, Message.user("Assess the risk of release v1\nplease"))
        store.create(newer)
        store.append_message(newer.id, Message.user("hello"))
        summaries = store.list()
        assert [s.id for s in summaries][:2] == [newer.id, older.id]
        by_id = {s.id: s for s in summaries}
        assert by_id[older.id].title == "Assess the risk of release v1"
        assert by_id[older.id].message_count == 1
        assert by_id[newer.id].metadata == {"model": "m"}

    def test_unknown_conversation_is_not_found(self, store: ConversationStore) -> None:
        with pytest.raises(ConversationNotFoundError):
            store.load("conv_missing")
        with pytest.raises(ConversationNotFoundError):
            store.append_message("conv_missing", Message.user("x"))
        with pytest.raises(ConversationNotFoundError):
            store.append_event("conv_missing", TextDelta(step=1, text="x"))
        with pytest.raises(ConversationNotFoundError):
            store.update_metadata("conv_missing", a=1)


class TestInMemoryStore(ConversationStoreContract):
    @pytest.fixture
    def store(self) -> InMemoryStore:
        return InMemoryStore()


class TestJsonFileStore(ConversationStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> JsonFileStore:
        return JsonFileStore(tmp_path / "conversations")
