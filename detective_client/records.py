"""What a commit is once read from git: frozen records that travel as JSON.

`to_json()` gives plain JSON values (the date as ISO 8601 with its offset); `from_json()` is
strict: a missing, unknown or wrongly typed field is a `RecordError` naming the field, so the
server refuses a bad commit with its reason instead of storing half of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


class RecordError(ValueError):
    """A JSON value that is not a valid record; the message names the field."""


def _object(
    value: Any, where: str, fields: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordError(f"{where}: expected an object, got {type(value).__name__}")
    missing = [name for name in fields if name not in value]
    if missing:
        raise RecordError(f"{where}: missing field {', '.join(missing)}")
    unknown = sorted(str(name) for name in value if name not in fields + optional)
    if unknown:
        raise RecordError(f"{where}: unknown field {', '.join(unknown)}")
    return value


def _string(value: Any, where: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise RecordError(f"{where}: expected a string, got {type(value).__name__}")
    if not empty and not value:
        raise RecordError(f"{where}: must not be empty")
    return value


def _count(value: Any, where: str) -> int | None:
    # bool is an int in Python; true as a line count is a mistake, not 1.
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{where}: expected a whole number or null, got {value!r}")
    if value < 0:
        raise RecordError(f"{where}: must not be negative, got {value}")
    return value


def _flag(value: Any, where: str) -> bool:
    # 1 and "true" are not booleans here: a client that sends them has a bug to hear about.
    if not isinstance(value, bool):
        raise RecordError(f"{where}: expected true or false, got {value!r}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise RecordError(f"{where}: expected a list, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class FileChangeRecord:
    """One file a commit touched. `added`/`deleted` are None for a binary file; `old_path` is
    the path before a rename (None when the file kept its name). `generated` and `vendored`:
    what the reader found at the release's head (`generated.py`: a generator's header,
    `linguist-generated` / `linguist-vendored` in `.gitattributes`); `removed`: the commit
    deleted the file (git's status D)."""

    path: str
    old_path: str | None
    added: int | None
    deleted: int | None
    generated: bool = False
    vendored: bool = False
    removed: bool = False

    FIELDS = ("path", "old_path", "added", "deleted")
    # Sent only when true, and optional on the way in: a record of an older client (or for an
    # older server) has none of them, and the same commits give the same JSON as before.
    FLAGS = ("generated", "vendored", "removed")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "path": self.path,
            "old_path": self.old_path,
            "added": self.added,
            "deleted": self.deleted,
        }
        data.update({flag: True for flag in self.FLAGS if getattr(self, flag)})
        return data

    @classmethod
    def from_json(cls, value: Any, where: str = "file") -> FileChangeRecord:
        data = _object(value, where, cls.FIELDS, cls.FLAGS)
        old_path = data["old_path"]
        added = _count(data["added"], f"{where}.added")
        deleted = _count(data["deleted"], f"{where}.deleted")
        if (added is None) != (deleted is None):
            raise RecordError(f"{where}: added and deleted are both numbers or both null")
        return cls(
            path=_string(data["path"], f"{where}.path"),
            old_path=None if old_path is None else _string(old_path, f"{where}.old_path"),
            added=added,
            deleted=deleted,
            generated=_flag(data.get("generated", False), f"{where}.generated"),
            vendored=_flag(data.get("vendored", False), f"{where}.vendored"),
            removed=_flag(data.get("removed", False), f"{where}.removed"),
        )

    @property
    def binary(self) -> bool:
        return self.added is None


@dataclass(frozen=True)
class CommitRecord:
    """One commit of a release's range. A merge commit lists its parents and no files (see
    `git.read_range`)."""

    sha: str
    author_name: str
    author_email: str
    authored_at: datetime
    message: str
    files: tuple[FileChangeRecord, ...]
    parents: tuple[str, ...]

    FIELDS = ("sha", "author_name", "author_email", "authored_at", "message", "files", "parents")

    def to_json(self) -> dict[str, Any]:
        return {
            "sha": self.sha,
            "author_name": self.author_name,
            "author_email": self.author_email,
            "authored_at": self.authored_at.isoformat(),
            "message": self.message,
            "files": [change.to_json() for change in self.files],
            "parents": list(self.parents),
        }

    @classmethod
    def from_json(cls, value: Any, where: str = "commit") -> CommitRecord:
        data = _object(value, where, cls.FIELDS)
        sha = _string(data["sha"], f"{where}.sha")
        if len(sha) not in (40, 64) or any(char not in "0123456789abcdef" for char in sha):
            raise RecordError(f"{where}.sha: expected 40 or 64 lowercase hex digits, got {sha!r}")
        when = _string(data["authored_at"], f"{where}.authored_at")
        try:
            authored_at = datetime.fromisoformat(when)
        except ValueError:
            raise RecordError(f"{where}.authored_at: not an ISO 8601 date: {when!r}") from None
        if authored_at.tzinfo is None:
            raise RecordError(f"{where}.authored_at: needs a UTC offset: {when!r}")
        files = _list(data["files"], f"{where}.files")
        parents = _list(data["parents"], f"{where}.parents")
        return cls(
            sha=sha,
            author_name=_string(data["author_name"], f"{where}.author_name", empty=True),
            author_email=_string(data["author_email"], f"{where}.author_email", empty=True),
            authored_at=authored_at,
            message=_string(data["message"], f"{where}.message", empty=True),
            files=tuple(
                FileChangeRecord.from_json(change, f"{where}.files[{index}]")
                for index, change in enumerate(files)
            ),
            parents=tuple(
                _string(parent, f"{where}.parents[{index}]") for index, parent in enumerate(parents)
            ),
        )

    @property
    def merge(self) -> bool:
        return len(self.parents) > 1
