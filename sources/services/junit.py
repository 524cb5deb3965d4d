"""JUnit XML reports into test case rows, streamed."""

from __future__ import annotations

import hashlib
from typing import IO, Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from releases.models import Release
from releases.stored_verdict import refreshed_once
from sources import summary
from sources.models import (
    Ingestion,
    IngestionToken,
    SourceKind,
    TestCase,
)
from sources.parsers import junit
from sources.parsers.openmetrics import MetricValueError
from sources.services.base import (
    BATCH,
    Ingested,
    IngestError,
    Origin,
    lock_release,
)
from sources.services.suspects import rank_stored

# ---- JUnit XML ---------------------------------------------------------------------------------


class _Hashing:
    """Reads through to `source`, hashing what passes."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source = source
        self.hash = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        chunk = self.source.read(size)
        self.hash.update(chunk)
        return chunk


class _Duplicate(Exception):
    def __init__(self, ingestion: Ingestion) -> None:
        self.ingestion = ingestion


@refreshed_once
def ingest_junit(
    release: Release,
    stream: IO[bytes],
    filename: str,
    origin: Origin,
    *,
    max_bytes: int = junit.MAX_BYTES,
    rank: bool = True,
) -> Ingested:
    """One JUnit XML report, streamed: its test cases are stored in batches as they are read,
    inside one transaction, so a report refused half-way (malformed, too big) leaves nothing.
    A test already stored for the release (from an earlier report) gets its next attempt.
    Where the release's commits came with their hunks, its failures' suspects are ranked again
    (`suspects.rank_stored`; `rank` False: the bundle ranks once, after all its parts)."""
    hashing = _Hashing(stream)
    try:
        with transaction.atomic():
            # One report into a release at a time: the same report sent by several jobs at
            # once is then stored once (the later ones find it), not a unique violation.
            lock_release(release)
            ingestion = Ingestion.objects.create(
                release=release,
                kind=SourceKind.JUNIT,
                content_hash=f"reading:{timezone.now().timestamp()}",
                token=origin.token,
                user=origin.user if getattr(origin.user, "is_authenticated", False) else None,
                origin=origin.via,
                file_names=[filename],
            )
            # A later report of the release reruns its tests: each invocation's next attempt.
            earlier: dict[tuple[str, str, str, int], int] = {}
            if TestCase.objects.filter(release=release).exists():
                earlier = {
                    (suite, classname, name, invocation): attempt
                    for suite, classname, name, invocation, attempt in TestCase.objects.filter(
                        release=release
                    )
                    .values("suite", "classname", "name", "invocation")
                    .annotate(last=Max("attempt"))
                    .values_list("suite", "classname", "name", "invocation", "last")
                }
            batch: list[tuple[Any, ...]] = []
            counts = {"test_cases": 0, "passed": 0, "failed": 0, "error": 0, "skipped": 0}
            counts["flaky"] = counts["xfailed"] = 0
            header = junit.ReportHeader()
            # Read once: `.pk` is a property, and this loop runs once per test case.
            release_id, ingestion_id = release.pk, ingestion.pk
            try:
                for record in junit.parse(hashing, filename, max_bytes=max_bytes, header=header):
                    counts["test_cases"] += 1
                    counts["xfailed" if record.xfailed else record.status] += 1
                    batch.append(_test_case_row(release_id, ingestion_id, record, earlier))
                    if len(batch) >= BATCH:
                        _insert_test_cases(batch)
                        batch.clear()
            except junit.JUnitError as exc:
                status = 413 if "larger" in exc.problem else 400
                raise IngestError(f"Refused: {exc}.", status) from None
            _insert_test_cases(batch)
            # Tests the header counts and no <testcase> is written for (pytest 9's subtests):
            # kept and said, not dropped. Counts of elements (test_cases) stay what they are.
            counts["header_tests"] = header.tests if header.tests is not None else 0
            counts["not_in_test_cases"] = header.not_written
            if header.failed_subtests:
                counts["failed_subtests"] = header.failed_subtests
            if header.interrupted:
                # The runner's own mark: the tests after it never ran (said, never green).
                counts["interrupted"] = 1
            content_hash = hashing.hash.hexdigest()
            existing = Ingestion.objects.filter(
                release=release, kind=SourceKind.JUNIT, content_hash=content_hash
            ).first()
            if existing is not None:
                raise _Duplicate(existing)
            ingestion.content_hash = content_hash
            ingestion.counts = counts
            ingestion.save(update_fields=["content_hash", "counts"])
            try:
                summary.refresh(release, SourceKind.JUNIT)
            except MetricValueError as exc:
                raise IngestError(f"Refused: {exc}.", 422) from None
            if rank and (counts["failed"] or counts["error"]):
                ranked = rank_stored(release)
                if ranked is not None:
                    ingestion.counts["failures_with_suspects"] = ranked
                    ingestion.save(update_fields=["counts"])
    except _Duplicate as duplicate:
        return Ingested(duplicate.ingestion, False)
    except IntegrityError as exc:
        raise IngestError(f"Refused: {filename}: {exc}.", 409) from None
    if origin.token is not None:
        IngestionToken.objects.filter(pk=origin.token.pk).update(last_used_at=timezone.now())
    return Ingested(ingestion, True)


# The columns of a test case row, in the order `_test_case_row` gives them. Rows are inserted
# with one executemany per batch, without a model instance each: for a report of 100,000 cases
# the ORM's per-object work (instances, per-field preparation) took most of the time (measured
# in `manage.py bench --only junit`). The values are the parser's, typed and bounded there.
_TEST_CASE_COLUMNS = (
    "release_id",
    "ingestion_id",
    "suite",
    "classname",
    "name",
    "file",
    "status",
    "duration",
    "failure_type",
    "failure_message",
    "traceback",
    "invocation",
    "attempt",
)


def _test_case_row(
    release_id: int,
    ingestion_id: int,
    record: junit.TestCaseRecord,
    earlier: dict[tuple[str, str, str, int], int],
) -> tuple[Any, ...]:
    return (
        release_id,
        ingestion_id,
        record.suite,
        record.classname,
        record.name,
        record.file or "",
        record.status,
        record.duration,
        record.failure_type,
        record.failure_message,
        record.traceback,
        record.invocation,
        earlier.get((record.suite, record.classname, record.name, record.invocation), 0)
        + record.attempt,
    )


def _insert_test_cases(rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    table = connection.ops.quote_name(TestCase._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(name) for name in _TEST_CASE_COLUMNS)
    marks = ", ".join(["%s"] * len(_TEST_CASE_COLUMNS))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
