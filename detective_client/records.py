"""What a commit is once read from git: frozen records that travel as JSON.

`to_json()` gives plain JSON values (the date as ISO 8601 with its offset); `from_json()` is
strict: a missing, unknown or wrongly typed field is a `RecordError` naming the field, so the
server refuses a bad commit with its reason instead of storing half of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


# The largest count or line number a record carries: the database's integer column (2**31 - 1).
MAX_COUNT = 2**31 - 1
# Text direction overrides and isolates (Trojan Source, CVE-2021-42574): a name or a path with
# one reads as something else on a page. A commit message may carry them (it is prose, shown
# as text); a name may not.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def text_problem(value: str, *, name: bool = False) -> str | None:
    """Why this text cannot be stored (a NUL, a lone surrogate; in a name, a bidi control)."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (invalid Unicode)"
    if name and not BIDI_CONTROLS.isdisjoint(value):
        return "contains a text direction control (U+202A..U+202E, U+2066..U+2069)"
    return None


def _string(value: Any, where: str, *, empty: bool = False, prose: bool = False) -> str:
    if not isinstance(value, str):
        raise RecordError(f"{where}: expected a string, got {type(value).__name__}")
    if not empty and not value:
        raise RecordError(f"{where}: must not be empty")
    if problem := text_problem(value, name=not prose):
        raise RecordError(f"{where}: {problem}")
    return value


def _count(value: Any, where: str) -> int | None:
    # bool is an int in Python; true as a line count is a mistake, not 1.
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{where}: expected a whole number or null, got {value!r}")
    if value < 0:
        raise RecordError(f"{where}: must not be negative, got {value}")
    if value > MAX_COUNT:
        raise RecordError(f"{where}: must be at most {MAX_COUNT:,}, got {value}")
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


HunkTuple = tuple[int, int, int, int]


def _hunks(value: Any, where: str) -> tuple[HunkTuple, ...] | None:
    if value is None:
        return None
    hunks: list[HunkTuple] = []
    for index, hunk in enumerate(_list(value, where)):
        at = f"{where}[{index}]"
        if not isinstance(hunk, list | tuple) or len(hunk) != 4:
            raise RecordError(f"{at}: expected [old_start, old_count, new_start, new_count]")
        numbers = [_count(number, at) for number in hunk]
        if any(number is None for number in numbers):
            raise RecordError(f"{at}: expected four whole numbers, got {hunk!r}")
        old_start, old_count, new_start, new_count = (int(n or 0) for n in numbers)
        hunks.append((old_start, old_count, new_start, new_count))
    return tuple(hunks)


@dataclass(frozen=True)
class FileChangeRecord:
    """One file a commit touched. `added`/`deleted` are None for a binary file; `old_path` is
    the path before a rename (None when the file kept its name). `generated` and `vendored`:
    what the reader found at the release's head (`generated.py`: a generator's header,
    `linguist-generated` / `linguist-vendored` in `.gitattributes`); `removed`: the commit
    deleted the file (git's status D).

    `hunks`: the line ranges the commit changed in it, `git diff -U0` headers as
    (old_start, old_count, new_start, new_count) (`detective_client.hunks`); None when not
    read (a client before them, a binary, lock or generated file, a range past the bound).
    Optional in the JSON, so a record without it, from an older client, is still valid."""

    path: str
    old_path: str | None
    added: int | None
    deleted: int | None
    generated: bool = False
    vendored: bool = False
    removed: bool = False
    hunks: tuple[HunkTuple, ...] | None = None

    FIELDS = ("path", "old_path", "added", "deleted")
    # Sent only when true, and optional on the way in: a record of an older client (or for an
    # older server) has none of them, and the same commits give the same JSON as before.
    FLAGS = ("generated", "vendored", "removed")
    OPTIONAL = (*FLAGS, "hunks")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "path": self.path,
            "old_path": self.old_path,
            "added": self.added,
            "deleted": self.deleted,
        }
        data.update({flag: True for flag in self.FLAGS if getattr(self, flag)})
        if self.hunks is not None:
            data["hunks"] = [list(hunk) for hunk in self.hunks]
        return data

    @classmethod
    def from_json(cls, value: Any, where: str = "file") -> FileChangeRecord:
        data = _object(value, where, cls.FIELDS, cls.OPTIONAL)
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
            hunks=_hunks(data.get("hunks"), f"{where}.hunks"),
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
        if not 1 < authored_at.year < 9999:
            raise RecordError(f"{where}.authored_at: out of range (years 2 to 9998): {when!r}")
        files = _list(data["files"], f"{where}.files")
        parents = _list(data["parents"], f"{where}.parents")
        return cls(
            sha=sha,
            author_name=_string(data["author_name"], f"{where}.author_name", empty=True),
            author_email=_string(data["author_email"], f"{where}.author_email", empty=True),
            authored_at=authored_at,
            message=_string(data["message"], f"{where}.message", empty=True, prose=True),
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


_SHA = frozenset("0123456789abcdef")


def _sha(value: Any, where: str) -> str:
    sha = _string(value, where)
    if len(sha) not in (40, 64) or any(char not in _SHA for char in sha):
        raise RecordError(f"{where}: expected 40 or 64 lowercase hex digits, got {sha!r}")
    return sha


BlameTuple = tuple[int, int, str]
ScopeTuple = tuple[int, int, tuple[str, ...]]


@dataclass(frozen=True)
class HeadRecord:
    """What ranking a failure's suspects needs from the release's head, which only a checkout
    has (`detective_client.head`): the import names of its test files (`tests`: test file →
    the modules, classes or relative paths it imports, as written) and, for the paths the
    range changed, which commit of the range last wrote each line at the head (`blame`: path →
    (start, end, sha)); for the Python files among those, each function's lines and the words
    of its text (`scopes`: path → (start, end, words)), which orders suspects by what a failure
    names. `truncated`: a bound of `detective_client.head` was reached."""

    sha: str
    tests: dict[str, tuple[str, ...]]
    blame: dict[str, tuple[BlameTuple, ...]]
    truncated: bool = False
    scopes: dict[str, tuple[ScopeTuple, ...]] = field(default_factory=dict)

    FIELDS = ("sha", "tests", "blame")
    OPTIONAL = ("truncated", "scopes")

    def to_json(self) -> dict[str, Any]:
        return {
            "sha": self.sha,
            "tests": {path: list(names) for path, names in self.tests.items()},
            "blame": {path: [list(r) for r in ranges] for path, ranges in self.blame.items()},
            "scopes": {
                path: [[start, end, list(words)] for start, end, words in found]
                for path, found in self.scopes.items()
            },
            "truncated": self.truncated,
        }

    @classmethod
    def from_json(cls, value: Any, where: str = "head") -> HeadRecord:
        data = _object(value, where, cls.FIELDS, cls.OPTIONAL)
        tests_in, blame_in = data["tests"], data["blame"]
        for name, given in (("tests", tests_in), ("blame", blame_in)):
            if not isinstance(given, dict):
                raise RecordError(f"{where}.{name}: expected an object, got {type(given).__name__}")
        tests = {
            _string(path, f"{where}.tests key"): tuple(
                _string(n, f"{where}.tests[{path!r}][{i}]")
                for i, n in enumerate(_list(names, f"{where}.tests[{path!r}]"))
            )
            for path, names in tests_in.items()
        }
        blame: dict[str, tuple[BlameTuple, ...]] = {}
        for path, ranges in blame_in.items():
            at = f"{where}.blame[{_string(path, f'{where}.blame key')!r}]"
            read: list[BlameTuple] = []
            for index, item in enumerate(_list(ranges, at)):
                if not isinstance(item, list | tuple) or len(item) != 3:
                    raise RecordError(f"{at}[{index}]: expected [start, end, sha]")
                start, end = _count(item[0], f"{at}[{index}]"), _count(item[1], f"{at}[{index}]")
                if start is None or end is None or not 1 <= start <= end:
                    raise RecordError(f"{at}[{index}]: expected 1 <= start <= end, got {item!r}")
                read.append((start, end, _sha(item[2], f"{at}[{index}]")))
            blame[path] = tuple(read)
        truncated = data.get("truncated", False)
        if not isinstance(truncated, bool):
            raise RecordError(f"{where}.truncated: expected true or false")
        scopes_in = data.get("scopes") or {}
        if not isinstance(scopes_in, dict):
            raise RecordError(f"{where}.scopes: expected an object")
        scopes: dict[str, tuple[ScopeTuple, ...]] = {}
        for path, found in scopes_in.items():
            at = f"{where}.scopes[{_string(path, f'{where}.scopes key')!r}]"
            read_scopes: list[ScopeTuple] = []
            for index, item in enumerate(_list(found, at)):
                if not isinstance(item, list | tuple) or len(item) != 3:
                    raise RecordError(f"{at}[{index}]: expected [start, end, [words]]")
                start, end = _count(item[0], f"{at}[{index}]"), _count(item[1], f"{at}[{index}]")
                if start is None or end is None or not 1 <= start <= end:
                    raise RecordError(f"{at}[{index}]: expected 1 <= start <= end, got {item!r}")
                words = tuple(
                    _string(w, f"{at}[{index}] word")
                    for w in _list(list(item[2]) if isinstance(item[2], tuple) else item[2], at)
                )
                read_scopes.append((start, end, words))
            scopes[path] = tuple(read_scopes)
        return cls(_sha(data["sha"], f"{where}.sha"), tests, blame, truncated, scopes)
