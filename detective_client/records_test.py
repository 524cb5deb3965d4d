"""The records' JSON: a round trip, and a clear error naming the field for each bad value."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from detective_client.records import CommitRecord, FileChangeRecord, HeadRecord, RecordError

SHA = "a" * 40


def commit_json(**changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "sha": SHA,
        "author_name": "Ada",
        "author_email": "ada@example.com",
        "authored_at": "2026-11-20T10:00:00+01:00",
        "message": "feat: x",
        "files": [
            {"path": "a.py", "old_path": None, "added": 3, "deleted": 1},
            {"path": "logo.png", "old_path": "img/logo.png", "added": None, "deleted": None},
        ],
        "parents": ["b" * 40],
    }
    value.update(changes)
    return value


def test_a_commit_round_trips() -> None:
    commit = CommitRecord(
        sha=SHA,
        author_name="Ada",
        author_email="ada@example.com",
        authored_at=datetime(2026, 11, 20, 10, tzinfo=timezone(timedelta(hours=1))),
        message="feat: x",
        files=(
            FileChangeRecord("a.py", None, 3, 1),
            FileChangeRecord("logo.png", "img/logo.png", None, None),
        ),
        parents=("b" * 40,),
    )
    assert commit.to_json() == commit_json()
    assert CommitRecord.from_json(commit_json()) == commit
    assert CommitRecord.from_json(commit_json()).authored_at == datetime(
        2026, 11, 20, 9, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"sha": "xyz"}, "commit.sha: expected 40 or 64 lowercase hex digits"),
        ({"sha": 12}, "commit.sha: expected a string, got int"),
        ({"authored_at": "yesterday"}, "commit.authored_at: not an ISO 8601 date"),
        ({"authored_at": "2026-11-20T10:00:00"}, "commit.authored_at: needs a UTC offset"),
        ({"files": "a.py"}, "commit.files: expected a list, got str"),
        ({"parents": [""]}, r"commit.parents\[0\]: must not be empty"),
        ({"extra": 1}, "commit: unknown field extra"),
        (
            {"files": [{"path": "a", "old_path": None, "added": "3", "deleted": 1}]},
            r"commit.files\[0\].added: expected a whole number or null, got '3'",
        ),
        (
            {"files": [{"path": "a", "old_path": None, "added": True, "deleted": 1}]},
            r"commit.files\[0\].added: expected a whole number",
        ),
        (
            {"files": [{"path": "a", "old_path": None, "added": -1, "deleted": 1}]},
            r"commit.files\[0\].added: must not be negative",
        ),
        (
            {"files": [{"path": "a", "old_path": None, "added": None, "deleted": 1}]},
            r"commit.files\[0\]: added and deleted are both numbers or both null",
        ),
        (
            {"files": [{"path": "", "old_path": None, "added": 1, "deleted": 1}]},
            r"commit.files\[0\].path: must not be empty",
        ),
        ({"files": [{"path": "a"}]}, r"commit.files\[0\]: missing field old_path, added, del"),
    ],
)
def test_a_bad_field_is_named(changes: dict[str, Any], error: str) -> None:
    with pytest.raises(RecordError, match=error):
        CommitRecord.from_json(commit_json(**changes))


def test_a_missing_field_and_a_non_object_are_refused() -> None:
    value = commit_json()
    del value["message"]
    with pytest.raises(RecordError, match="commit: missing field message"):
        CommitRecord.from_json(value)
    with pytest.raises(RecordError, match=r"commits\[2\]: expected an object, got list"):
        CommitRecord.from_json([], where="commits[2]")


def test_the_file_flags_are_optional_and_sent_only_when_true() -> None:
    old_client = {"path": "idna/uts46data.py", "old_path": None, "added": 9000, "deleted": 8}
    record = FileChangeRecord.from_json(old_client)
    assert (record.generated, record.vendored, record.removed) == (False, False, False)
    # Unflagged, the JSON is what it was before the flags: an older server takes it.
    assert record.to_json() == old_client
    flagged = {**old_client, "generated": True, "removed": True}
    again = FileChangeRecord.from_json(flagged)
    assert (again.generated, again.vendored, again.removed) == (True, False, True)
    assert again.to_json() == flagged


@pytest.mark.parametrize("value", [1, "true", None])
def test_a_flag_that_is_not_a_boolean_is_named(value: Any) -> None:
    change = {"path": "a.py", "old_path": None, "added": 1, "deleted": 0, "generated": value}
    with pytest.raises(RecordError, match=r"file\.generated: expected true or false"):
        FileChangeRecord.from_json(change)
    with pytest.raises(RecordError, match="unknown field generatd"):
        FileChangeRecord.from_json({**change, "generated": True, "generatd": True})


def test_hunks_are_optional_and_round_trip() -> None:
    file = {"path": "a.py", "old_path": None, "added": 1, "deleted": 1}
    assert FileChangeRecord.from_json(file).hunks is None  # an older client's record
    with_hunks = FileChangeRecord.from_json({**file, "hunks": [[2, 1, 2, 1], [9, 0, 10, 3]]})
    assert with_hunks.hunks == ((2, 1, 2, 1), (9, 0, 10, 3))
    assert FileChangeRecord.from_json(with_hunks.to_json()) == with_hunks
    assert "hunks" not in FileChangeRecord.from_json(file).to_json()


@pytest.mark.parametrize(
    ("hunks", "error"),
    [
        ("2,1,2,1", "file.hunks: expected a list"),
        ([[2, 1, 2]], "file.hunks[0]: expected [old_start"),
        ([[2, 1, 2, -1]], "must not be negative"),
        ([[2, 1, True, 1]], "expected a whole number"),
        ([[2, 1, None, 1]], "expected four whole numbers"),
    ],
)
def test_bad_hunks_are_named(hunks: Any, error: str) -> None:
    file = {"path": "a.py", "old_path": None, "added": 1, "deleted": 1, "hunks": hunks}
    with pytest.raises(RecordError, match=re.escape(error)):
        FileChangeRecord.from_json(file)


def test_a_head_round_trips_and_scopes_are_optional() -> None:
    head = HeadRecord(
        SHA,
        {"tests/test_a.py": ("a",)},
        {"a.py": ((1, 3, SHA),)},
        False,
        {"a.py": ((1, 3, ("alpha",)),)},
    )
    assert HeadRecord.from_json(head.to_json()) == head
    bare = {"sha": SHA, "tests": {}, "blame": {}}
    assert HeadRecord.from_json(bare) == HeadRecord(SHA, {}, {})


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"sha": "HEAD"}, "head.sha: expected 40 or 64"),
        ({"tests": []}, "head.tests: expected an object"),
        ({"tests": {"t.py": "a"}}, "head.tests['t.py']: expected a list"),
        ({"blame": {"a.py": [[3, 1, SHA]]}}, "expected 1 <= start <= end"),
        ({"blame": {"a.py": [[1, 2, "b" * 7]]}}, "expected 40 or 64"),
        ({"scopes": {"a.py": [[1, 2]]}}, "expected [start, end, [words]]"),
        ({"truncated": "no"}, "head.truncated: expected true or false"),
        ({"paths": []}, "head: unknown field paths"),
    ],
)
def test_a_bad_head_is_named(changes: dict[str, Any], error: str) -> None:
    with pytest.raises(RecordError, match=re.escape(error)):
        HeadRecord.from_json({"sha": SHA, "tests": {}, "blame": {}, **changes})
