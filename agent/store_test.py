"""What only the JSON-file store does: files, the session log, reopening."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pydantic
import pytest

from agent.events import RunFinished, TextDelta
from agent.messages import Conversation, Message
from agent.store import ConversationNotFoundError, JsonFileStore


def test_one_json_file_and_one_session_log_per_conversation(tmp_path: Path) -> None:
    store = JsonFileStore(tmp_path)
    conversation = Conversation(system_prompt="s")
    store.create(conversation)
    store.append_message(conversation.id, Message.user("Assess v1"))
    store.append_event(conversation.id, TextDelta(step=1, text="a"))
    store.append_event(conversation.id, RunFinished(reason="answered"))

    saved = json.loads((tmp_path / f"{conversation.id}.json").read_text())
    assert saved["messages"][0]["content"] == "Assess v1"
    lines = (tmp_path / f"{conversation.id}.events.jsonl").read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [1, 2]
    assert json.loads(lines[1])["event"]["kind"] == "run_finished"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{conversation.id}.json", f"{conversation.id}.events.jsonl"]
    )


def test_a_new_store_on_the_same_directory_continues(tmp_path: Path) -> None:
    store = JsonFileStore(tmp_path)
    conversation = Conversation()
    store.create(conversation)
    store.append_event(conversation.id, TextDelta(step=1, text="a"))
    store.append_message(conversation.id, Message.user("one"))

    reopened = JsonFileStore(tmp_path)
    assert reopened.append_event(conversation.id, TextDelta(step=1, text="b")) == 2
    assert [m.content for m in reopened.load(conversation.id).messages] == ["one"]
    assert [s.id for s in reopened.list()] == [conversation.id]


def test_failed_write_leaves_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonFileStore(tmp_path)
    conversation = Conversation()
    store.create(conversation)
    before = (tmp_path / f"{conversation.id}.json").read_text()

    def fail(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        store.update_metadata(conversation.id, x=1)
    assert (tmp_path / f"{conversation.id}.json").read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == [f"{conversation.id}.json"]


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", ".hidden", "x" * 200])
def test_ids_that_are_not_plain_names_are_refused(tmp_path: Path, bad: str) -> None:
    store = JsonFileStore(tmp_path)
    with pytest.raises(ConversationNotFoundError):
        store.load(bad)


def test_list_skips_files_that_are_not_conversations(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text("[1, 2]")
    store = JsonFileStore(tmp_path)
    conversation = Conversation()
    store.create(conversation)
    with pytest.raises(pydantic.ValidationError):
        store.load("notes")
    assert [s.id for s in store.list()] == [conversation.id]
