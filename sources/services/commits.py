"""Commits of a release's git range into rows."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from detective_client.conventional import classify
from detective_client.records import CommitRecord
from releases.models import Release
from sources import summary
from sources.models import (
    ChangeType,
    Commit,
    CommitFile,
    SourceKind,
)
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

REBUILD = "No changes: a rebuild of the previous release's commit (the range holds no commit)"

# ---- commits -----------------------------------------------------------------------------------


def ingest_commits(
    release: Release,
    commits: Sequence[CommitRecord],
    origin: Origin,
    *,
    file_names: Sequence[str] = (),
) -> Ingested:
    """The commits of the release's range (a commit already stored for it is not stored twice).
    None at all is a rebuild (both refs the same commit, `detective_client.git.read_range`): a
    release with no changes, said so in its changes (an empty list would read as missing);
    swapped or unknown refs are the reader's errors and never get here."""
    if len(commits) > MAX_COMMITS:
        raise IngestError(f"{len(commits):,} commits: at most {MAX_COMMITS:,} per release.", 413)
    content_hash = _digest(sorted((commit.to_json() for commit in commits), key=lambda c: c["sha"]))
    with transaction.atomic():
        ingestion, created = _record(
            release, SourceKind.COMMITS, content_hash, origin, file_names, {}
        )
        if not created:
            return Ingested(ingestion, False)
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
        ingestion.save(update_fields=["counts"])
        summary.refresh(release, SourceKind.COMMITS)
        if not commits and not Commit.objects.filter(release=release).exists():
            release.changes = [REBUILD]
            release.save(update_fields=["changes", "updated_at"])
    return Ingested(ingestion, True)
