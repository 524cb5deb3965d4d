"""Commits of a release's git range into rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, models, transaction

from detective_client.conventional import classify
from detective_client.head import (
    MAX_BLAMED_PATHS,
    MAX_IMPORTS,
    MAX_SCOPES,
    MAX_TEST_FILES,
    MAX_WORDS,
)
from detective_client.hunks import MAX_HUNKS
from detective_client.imports import MAX_NODES
from detective_client.records import CommitRecord, HeadRecord
from releases.models import Release
from releases.stored_verdict import refreshed_once
from risk.changes import NO_CHANGES
from sources import summary
from sources.models import (
    ChangeType,
    Commit,
    CommitFile,
    ReleaseHead,
    SourceKind,
)
from sources.parsers.openmetrics import MetricValueError
from sources.services.base import (
    BATCH,
    MAX_COMMITS,
    Ingested,
    IngestError,
    Origin,
    _check_text,
    _digest,
    _record,
)
from sources.services.suspects import rank_stored

# Blame ranges a release's head may carry in all (a 300-path blame of real files is far below).
MAX_BLAME_RANGES = 200_000

REBUILD = NO_CHANGES

# ---- commits -----------------------------------------------------------------------------------


def _check_bounds(commits: Sequence[CommitRecord], head: HeadRecord | None) -> None:
    """The client's bounds (detective_client.hunks, .head), held here too: past them, 413."""
    hunks = sum(len(f.hunks or ()) for c in commits for f in c.files)
    if hunks > MAX_HUNKS:
        raise IngestError(f"{hunks:,} hunks: at most {MAX_HUNKS:,} per release.", 413)
    if head is None:
        return
    # The test files and the files their import graph reaches (`detective_client.imports`).
    if len(head.tests) > MAX_TEST_FILES + MAX_NODES:
        raise IngestError(
            f"head.tests: {len(head.tests):,} files, at most {MAX_TEST_FILES + MAX_NODES:,}.", 413
        )
    for path, names in head.tests.items():
        _check_text(f"head.tests[{path[:100]!r}]", path)
        if len(names) > MAX_IMPORTS:
            raise IngestError(f"head.tests[{path[:100]!r}]: over {MAX_IMPORTS} names.", 413)
    if len(head.blame) > MAX_BLAMED_PATHS:
        raise IngestError(
            f"head.blame: {len(head.blame):,} paths, at most {MAX_BLAMED_PATHS:,}.", 413
        )
    ranges = sum(len(r) for r in head.blame.values())
    if ranges > MAX_BLAME_RANGES:
        raise IngestError(f"head.blame: {ranges:,} ranges, at most {MAX_BLAME_RANGES:,}.", 413)
    if len(head.scopes) > MAX_BLAMED_PATHS:
        raise IngestError(f"head.scopes: over {MAX_BLAMED_PATHS:,} paths.", 413)
    for path, scopes in head.scopes.items():
        if len(scopes) > MAX_SCOPES or any(len(words) > MAX_WORDS for _, _, words in scopes):
            raise IngestError(
                f"head.scopes[{path[:100]!r}]: over {MAX_SCOPES:,} functions or "
                f"{MAX_WORDS} words a function.",
                413,
            )


def _store_head(release: Release, head: HeadRecord) -> None:
    ReleaseHead.objects.update_or_create(
        release=release,
        defaults={
            "sha": head.sha,
            "tests": {path: list(names) for path, names in head.tests.items()},
            "blame": {path: [list(r) for r in ranges] for path, ranges in head.blame.items()},
            "scopes": {
                path: [[start, end, list(words)] for start, end, words in found]
                for path, found in head.scopes.items()
            },
            "truncated": head.truncated,
        },
    )


def _fill_hunks(release: Release, commits: Sequence[CommitRecord]) -> int:
    """Hunks sent for commits stored before without them (an older client's ingestion)."""
    sent = {
        (c.sha, f.path): [list(h) for h in f.hunks]
        for c in commits
        for f in c.files
        if f.hunks is not None
    }
    if not sent:
        return 0
    missing = CommitFile.objects.filter(commit__release=release, hunks__isnull=True)
    filled = []
    for row in missing.select_related("commit"):
        hunks = sent.get((row.commit.sha, row.path))
        if hunks is not None:
            row.hunks = hunks
            filled.append(row)
    CommitFile.objects.bulk_update(filled, ["hunks"], batch_size=BATCH)
    return len(filled)


# Commits and their files are inserted with one executemany per batch, without a model instance
# each: on pallets/click's 3,261 commits and 5,184 files, `bulk_create`'s per-object and
# per-field work was most of `ingest_commits` (issue 39, item 3). The values are checked and
# bounded above, as the model's fields would.
_COMMIT_COLUMNS = (
    "release_id",
    "ingestion_id",
    "sha",
    "author_name",
    "author_email",
    "authored_at",
    "message",
    "parents",
    "change_type",
    "scope",
    "breaking",
)
_PARENTS = _COMMIT_COLUMNS.index("parents")
_FILE_COLUMNS = (
    "path",
    "old_path",
    "added",
    "deleted",
    "binary",
    "generated",
    "vendored",
    "removed",
    "hunks",
    "commit_id",
)
_CHANGE_TYPES = frozenset(ChangeType.values)


def _insert(
    cursor: Any, model: type[models.Model], columns: Sequence[str], rows: list[Any]
) -> None:
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(name) for name in columns)
    marks = ", ".join(["%s"] * len(columns))
    for start in range(0, len(rows), BATCH):
        cursor.executemany(
            f"INSERT INTO {table} ({names}) VALUES ({marks})", rows[start : start + BATCH]
        )


def _insert_commits(
    release: Release,
    ingestion_id: int,
    rows: list[tuple[Any, ...]],
    files: list[list[tuple[Any, ...]]],
) -> list[tuple[Any, ...]]:
    """The commits' rows, then their files' with the commits' ids; the files' rows inserted."""
    ops = connection.ops
    commit_rows = [
        (
            *row[:5],
            ops.adapt_datetimefield_value(row[5]),
            row[6],
            ops.adapt_json_value(row[_PARENTS], None),
            *row[8:],
        )
        for row in rows
    ]
    with connection.cursor() as cursor:
        _insert(cursor, Commit, _COMMIT_COLUMNS, commit_rows)
        ids = dict(
            Commit.objects.filter(release=release, ingestion_id=ingestion_id).values_list(
                "sha", "id"
            )
        )
        file_rows = [
            (
                *change[:8],
                None if change[8] is None else ops.adapt_json_value(change[8], None),
                ids[row[2]],
            )
            for row, changes in zip(rows, files, strict=True)
            for change in changes
        ]
        _insert(cursor, CommitFile, _FILE_COLUMNS, file_rows)
    return [change for changes in files for change in changes]


@refreshed_once
def ingest_commits(
    release: Release,
    commits: Sequence[CommitRecord],
    origin: Origin,
    *,
    file_names: Sequence[str] = (),
    head: HeadRecord | None = None,
    rank: bool = True,
) -> Ingested:
    """The commits of the release's range (a commit already stored for it is not stored twice).
    None at all is a rebuild (both refs the same commit, `detective_client.git.read_range`): a
    release with no changes, said so in its changes (an empty list would read as missing);
    swapped or unknown refs are the reader's errors and never get here.

    With the files' hunks and the head's facts (the CI client sends both), the suspects of the
    release's failures are ranked again (`suspects.rank_stored`), unless `rank` is False (the
    bundle ranks once, after all its parts)."""
    if len(commits) > MAX_COMMITS:
        raise IngestError(f"{len(commits):,} commits: at most {MAX_COMMITS:,} per release.", 413)
    _check_bounds(commits, head)
    content = sorted((commit.to_json() for commit in commits), key=lambda c: c["sha"])
    content_hash = _digest(
        content if head is None else {"commits": content, "head": head.to_json()}
    )
    with transaction.atomic():
        ingestion, created = _record(
            release, SourceKind.COMMITS, content_hash, origin, file_names, {}
        )
        if not created:
            return Ingested(ingestion, False)
        if head is not None:
            _store_head(release, head)
        filled = _fill_hunks(release, commits)
        known = set(Commit.objects.filter(release=release).values_list("sha", flat=True))
        rows: list[tuple[Any, ...]] = []
        files: list[list[tuple[Any, ...]]] = []
        for commit in commits:
            if commit.sha in known:
                continue
            known.add(commit.sha)
            where = f"commit {commit.sha[:12]}"
            conventional = classify(_check_text(f"{where}: the message", commit.message))
            kind = conventional.type if conventional.type in _CHANGE_TYPES else "other"
            rows.append(
                (
                    release.pk,
                    ingestion.pk,
                    commit.sha,
                    _check_text(where, commit.author_name)[:200],
                    _check_text(where, commit.author_email)[:254],
                    commit.authored_at,
                    commit.message,
                    list(commit.parents),
                    kind,
                    (conventional.scope or "")[:100],
                    conventional.breaking,
                )
            )
            files.append(
                [
                    (
                        _check_text(where, change.path)[:1000],
                        _check_text(where, change.old_path or "")[:1000],
                        change.added,
                        change.deleted,
                        change.added is None,
                        change.generated,
                        change.vendored,
                        change.removed,
                        None if change.hunks is None else [list(h) for h in change.hunks],
                    )
                    for change in commit.files
                ]
            )
        stored_files = _insert_commits(release, ingestion.pk, rows, files)
        ingestion.counts = {
            "commits": len(rows),
            "already_stored": len(commits) - len(rows),
            "merges": sum(len(row[_PARENTS]) > 1 for row in rows),
            "files": len(stored_files),
        }
        with_hunks = sum(f[-1] is not None for f in stored_files) + filled
        if with_hunks:
            ingestion.counts["files_with_hunks"] = with_hunks
        ingestion.save(update_fields=["counts"])
        try:
            summary.refresh(release, SourceKind.COMMITS)
        except MetricValueError as exc:
            raise IngestError(f"Refused: {exc}.", 422) from None
        if not commits and not Commit.objects.filter(release=release).exists():
            release.changes = [REBUILD]
            release.save(update_fields=["changes", "updated_at"])
        if rank:
            ranked = rank_stored(release)
            if ranked is not None:
                ingestion.counts["failures_with_suspects"] = ranked
                ingestion.save(update_fields=["counts"])
    return Ingested(ingestion, True)
