"""A failure on the database's schema, and the release's schema changes that may be its cause.

A test that errors with a constraint or schema error (PostgreSQL's `NotNullViolation`,
SQLite's "no such column", an `IntegrityError`) in a release that adds or changes a migration
is most often that migration's doing: a column added NOT NULL without a default, a column
renamed that the code still reads. Its traceback runs through the ORM and the test's fixture,
never through the migration file, so neither the frames nor the imports find it. The ranking
(`risk.suspects.rank_suspects`) makes such changes suspects of their own kind: the release's
only schema change first of all, several after the changes a frame runs through, the one whose
file names a table or column of the error first among them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol

from risk.changes import file_kind

__all__ = ["SchemaChange", "schema_changes", "schema_error", "shared_words"]

# The schema and constraint errors of the databases people test on, as their drivers word them.
_SCHEMA_ERROR = re.compile(
    r"NotNullViolation|UniqueViolation|ForeignKeyViolation|CheckViolation"
    r"|UndefinedColumn|UndefinedTable|IntegrityError|DataIntegrityViolation\w*"
    r"|SQLIntegrityConstraintViolation\w*"
    r"|NOT NULL constraint failed:?\s*[\w.]*|UNIQUE constraint failed:?\s*[\w.]*"
    r"|FOREIGN KEY constraint failed|CHECK constraint failed:?\s*\w*"
    r"|no such (?:column|table):?\s*[\w.]*|has no column named \w+"
    r"|null value in column \"?\w+\"?[^\n]{0,80}?violates not-null constraint"
    r"|(?:column|relation) \"?[\w.]+\"? (?:of relation \"?\w+\"? )?does not exist"
    r"|Unknown column '?[\w.]+'?|Table '?[\w.]+'? doesn't exist"
    r"|Field '?\w+'? doesn't have a default value",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z][a-z0-9]{2,}")
_STOP = frozenset(
    {"constraint", "failed", "column", "table", "such", "null", "value", "violates", "not",
     "relation", "does", "exist", "unique", "foreign", "key", "check", "unknown", "field",
     "doesn", "have", "default", "has", "named", "the", "error", "integrityerror", "auto",
     "initial", "migration", "migrations", "alter", "add", "remove", "create", "delete",
     "violation", "notnullviolation", "undefinedcolumn", "undefinedtable", "py", "sql"}
)  # fmt: skip


def schema_error(text: str) -> str:
    """The schema or constraint error a failure's text shows, as written, its most telling
    wording ("NOT NULL constraint failed: orders.currency" over the "IntegrityError" before
    it); "" if none."""
    found = [m.group(0).strip() for m in _SCHEMA_ERROR.finditer(text or "")]
    return max(found, key=len) if found else ""


def shared_words(error_text: str, path: str) -> list[str]:
    """The words of a schema file's name that the error's text names (a table, a column):
    "0042_order_discount.py" and "NOT NULL constraint failed: shop_order.discount"."""
    error_words = set(_WORD.findall(error_text.lower())) - _STOP
    stem = PurePosixPath(path).stem.lower()
    return sorted((set(_WORD.findall(stem.replace("_", " "))) - _STOP) & error_words)


class _File(Protocol):
    path: str


class _Commit(Protocol):
    sha: str
    automated: bool

    @property
    def files(self) -> Sequence[_File]: ...


@dataclass(frozen=True)
class SchemaChange:
    sha: str
    paths: tuple[str, ...]


def schema_changes(commits: Sequence[_Commit]) -> list[SchemaChange]:
    """The commits that add or change a schema file (a migration, an `*.sql`, alembic's, a
    Prisma schema), newest first as given; a dependency bump's or a bot's are left out."""
    found = []
    for commit in commits:
        if commit.automated:
            continue
        paths = tuple(f.path for f in commit.files if file_kind(f.path) == "schema")
        if paths:
            found.append(SchemaChange(commit.sha, paths))
    return found
