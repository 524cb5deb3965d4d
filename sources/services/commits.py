"""Commits of a release's git range into rows."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

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
        rows: list[Commit] = []
        files: list[list[CommitFile]] = []
        for commit in commits:
            if commit.sha in known:
                continue
            known.add(commit.sha)
            where = f"commit {commit.sha[:12]}"
            conventional = classify(_check_text(f"{where}: the message", commit.message))
            kind = conventional.type if conventional.type in ChangeType.values else "other"
            rows.append(
                Commit(
                    release=release,
                    ingestion=ingestion,
                    sha=commit.sha,
                    author_name=_check_text(where, commit.author_name)[:200],
                    author_email=_check_text(where, commit.author_email)[:254],
                    authored_at=commit.authored_at,
                    message=commit.message,
                    parents=list(commit.parents),
                    change_type=kind,
                    scope=(conventional.scope or "")[:100],
                    breaking=conventional.breaking,
                )
            )
            files.append(
                [
                    CommitFile(
                        path=_check_text(where, change.path)[:1000],
                        old_path=_check_text(where, change.old_path or "")[:1000],
                        added=change.added,
                        deleted=change.deleted,
                        binary=change.added is None,
                        generated=change.generated,
                        vendored=change.vendored,
                        removed=change.removed,
                        hunks=None if change.hunks is None else [list(h) for h in change.hunks],
                    )
                    for change in commit.files
                ]
            )
        Commit.objects.bulk_create(rows, batch_size=BATCH)
        stored_files: list[CommitFile] = []
        for row, changes in zip(rows, files, strict=True):
            for change in changes:
                change.commit = row
                stored_files.append(change)
        CommitFile.objects.bulk_create(stored_files, batch_size=BATCH)
        ingestion.counts = {
            "commits": len(rows),
            "already_stored": len(commits) - len(rows),
            "merges": sum(len(row.parents) > 1 for row in rows),
            "files": len(stored_files),
        }
        with_hunks = sum(f.hunks is not None for f in stored_files) + filled
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
