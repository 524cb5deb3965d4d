"""Writes: records from the parsers into rows, one transaction per ingestion.

Every way in (the API, `manage.py ingest`, the release managers' forms, the demo seed) calls
these functions, so none can store what another would refuse. Each ingestion is recorded with
its origin and keyed by the hash of its content: the same report sent twice is stored once
(the second call answers with the first ingestion, `created=False`). A rerun is a new report,
so its test cases are new attempts of the same tests. A failure anywhere rolls the whole
ingestion back: nothing of a refused report is half-stored.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.text import slugify

from detective_client.conventional import classify
from detective_client.records import CommitRecord
from releases.models import Release, Service
from releases.validation import text_problem
from sources import summary
from sources.models import (
    ChangeType,
    Commit,
    CommitFile,
    Ingestion,
    IngestionToken,
    MetricSample,
    MetricWindow,
    SourceKind,
    TestCase,
)
from sources.parsers import junit, prometheus
from sources.parsers.openmetrics import MetricSampleRecord, MetricsFormatError, parse_metrics
from sources.selectors import hash_token

BATCH = 2000
MAX_COMMITS = 20_000
MAX_SAMPLES = 200_000


class IngestError(Exception):
    """Refused; `status` is the HTTP status the API answers with, the message says why."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Origin:
    """Who sent it and how: `via` is api, command, admin or seed."""

    via: str
    token: IngestionToken | None = None
    user: Any = None


@dataclass(frozen=True)
class Ingested:
    ingestion: Ingestion
    created: bool

    @property
    def counts(self) -> dict[str, Any]:
        return self.ingestion.counts


@dataclass(frozen=True)
class ReleaseFields:
    """A release as a caller describes it; None leaves a stored field as it is."""

    version: str
    service: str | None = None
    title: str | None = None
    environment: str | None = None
    git_from_ref: str | None = None
    git_to_ref: str | None = None
    head_sha: str | None = None
    pipeline_url: str | None = None
    deployed_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def updates(self) -> dict[str, Any]:
        names = ("title", "environment", "git_from_ref", "git_to_ref", "head_sha")
        found = {name: getattr(self, name) for name in names if getattr(self, name) is not None}
        if self.pipeline_url is not None:
            found["pipeline_url"] = self.pipeline_url
        if self.deployed_at is not None:
            found["deployed_at"] = self.deployed_at
        return found


# ---- services, tokens, releases ----------------------------------------------------------------


def find_service(name: str | None) -> Service | None:
    """The service by slug or name; the default service for None."""
    if not name:
        return Service.default()
    return (
        Service.objects.filter(slug=slugify(name)).first()
        or Service.objects.filter(name=name).first()
    )


def service_for(name: str | None, origin: Origin, *, create: bool = False) -> Service:
    """The service a caller names, checked against its token; made when `create` and new."""
    service = find_service(name)
    if service is None:
        if not create:
            raise IngestError(f"No service {name!r}.", 404)
        slug = slugify(name or "")
        if not slug:
            raise IngestError(f"{name!r} cannot name a service: use letters or digits.")
        if origin.token is not None and origin.token.service_id is not None:
            raise IngestError(f"This token may ingest for {origin.token.service} only.", 403)
        service = Service.objects.create(name=name, slug=slug)
    check_token(origin, service)
    return service


def check_token(origin: Origin, service: Service) -> None:
    if origin.token is not None and not origin.token.may_ingest(service):
        raise IngestError(
            f"This token may ingest for {origin.token.service} only, not for {service}.", 403
        )


def release_for(version: str, service_name: str | None, origin: Origin) -> Release:
    service = service_for(service_name, origin)
    release = Release.objects.filter(service=service, version=version).first()
    if release is None:
        raise IngestError(
            f"No release {version!r} of {service}: create it first (POST /api/releases).", 404
        )
    return release


def _problems(error: ValidationError) -> str:
    if hasattr(error, "message_dict"):
        return "; ".join(
            f"{name}: {' '.join(messages)}" if name != "__all__" else " ".join(messages)
            for name, messages in error.message_dict.items()
        )
    return " ".join(error.messages)


def _digest(value: Any) -> str:
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, default=str, ensure_ascii=False).encode()
    ).hexdigest()


def upsert_release(fields: ReleaseFields, origin: Origin) -> tuple[Release, bool]:
    """Create the release of this service and version, or update the fields given: (release,
    created). Validated by the model (the same checks as the admin's form)."""
    with transaction.atomic():
        service = service_for(fields.service, origin, create=True)
        release = (
            Release.objects.select_for_update()
            .filter(service=service, version=fields.version)
            .first()
        )
        created = release is None
        if release is None:
            release = Release(service=service, version=fields.version)
        for name, value in fields.updates().items():
            setattr(release, name, value)
        try:
            release.full_clean()
        except ValidationError as exc:
            raise IngestError(f"Invalid release: {_problems(exc)}", 422) from None
        release.save()
        record = {"version": fields.version, "service": service.slug, **fields.updates()}
        _record(release, SourceKind.RELEASE, _digest(record), origin, (), {"created": created})
    return release, created


def _record(
    release: Release,
    kind: str,
    content_hash: str,
    origin: Origin,
    file_names: Sequence[str],
    counts: dict[str, Any],
) -> tuple[Ingestion, bool]:
    existing = Ingestion.objects.filter(
        release=release, kind=kind, content_hash=content_hash
    ).first()
    if existing is not None:
        return existing, False
    if origin.token is not None:
        IngestionToken.objects.filter(pk=origin.token.pk).update(last_used_at=timezone.now())
    ingestion = Ingestion.objects.create(
        release=release,
        kind=kind,
        content_hash=content_hash,
        token=origin.token,
        user=origin.user if getattr(origin.user, "is_authenticated", False) else None,
        origin=origin.via,
        file_names=list(file_names),
        counts=counts,
    )
    return ingestion, True


# ---- commits -----------------------------------------------------------------------------------


def _check_text(where: str, value: str) -> str:
    if problem := text_problem(value):
        raise IngestError(f"{where} {problem}.", 422)
    return value


def ingest_commits(
    release: Release,
    commits: Sequence[CommitRecord],
    origin: Origin,
    *,
    file_names: Sequence[str] = (),
) -> Ingested:
    """The commits of the release's range (a commit already stored for it is not stored twice)."""
    if not commits:
        raise IngestError(
            "No commits: the range is empty (is FROM already an ancestor of TO?).", 422
        )
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
    return Ingested(ingestion, True)


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


def ingest_junit(
    release: Release,
    stream: IO[bytes],
    filename: str,
    origin: Origin,
    *,
    max_bytes: int = junit.MAX_BYTES,
) -> Ingested:
    """One JUnit XML report, streamed: its test cases are stored in batches as they are read,
    inside one transaction, so a report refused half-way (malformed, too big) leaves nothing.
    A test already stored for the release (from an earlier report) gets its next attempt."""
    hashing = _Hashing(stream)
    try:
        with transaction.atomic():
            ingestion = Ingestion.objects.create(
                release=release,
                kind=SourceKind.JUNIT,
                content_hash=f"reading:{timezone.now().timestamp()}",
                token=origin.token,
                user=origin.user if getattr(origin.user, "is_authenticated", False) else None,
                origin=origin.via,
                file_names=[filename],
            )
            earlier: dict[tuple[str, str, str], int] = {}
            if TestCase.objects.filter(release=release).exists():
                earlier = {
                    (suite, classname, name): attempt
                    for suite, classname, name, attempt in TestCase.objects.filter(release=release)
                    .values("suite", "classname", "name")
                    .annotate(last=Max("attempt"))
                    .values_list("suite", "classname", "name", "last")
                }
            batch: list[tuple[Any, ...]] = []
            counts = {"test_cases": 0, "passed": 0, "failed": 0, "error": 0, "skipped": 0}
            counts["flaky"] = 0
            try:
                for record in junit.parse(hashing, filename, max_bytes=max_bytes):
                    counts["test_cases"] += 1
                    counts[record.status] += 1
                    batch.append(_test_case_row(release.pk, ingestion.pk, record, earlier))
                    if len(batch) >= BATCH:
                        _insert_test_cases(batch)
                        batch.clear()
            except junit.JUnitError as exc:
                status = 413 if "larger" in exc.problem else 400
                raise IngestError(f"Refused: {exc}.", status) from None
            _insert_test_cases(batch)
            content_hash = hashing.hash.hexdigest()
            existing = Ingestion.objects.filter(
                release=release, kind=SourceKind.JUNIT, content_hash=content_hash
            ).first()
            if existing is not None:
                raise _Duplicate(existing)
            ingestion.content_hash = content_hash
            ingestion.counts = counts
            ingestion.save(update_fields=["content_hash", "counts"])
            summary.refresh(release, SourceKind.JUNIT)
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
    "attempt",
)


def _test_case_row(
    release_id: int,
    ingestion_id: int,
    record: junit.TestCaseRecord,
    earlier: dict[tuple[str, str, str], int],
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
        earlier.get(record.key, 0) + record.attempt,
    )


def _insert_test_cases(rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    table = connection.ops.quote_name(TestCase._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(name) for name in _TEST_CASE_COLUMNS)
    marks = ", ".join(["%s"] * len(_TEST_CASE_COLUMNS))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)


# ---- metrics -----------------------------------------------------------------------------------


def ingest_metrics(
    release: Release,
    samples: Iterable[MetricSampleRecord],
    origin: Origin,
    *,
    window: str = MetricWindow.RELEASE,
    file_names: Sequence[str] = (),
    allow_empty: bool = False,
) -> Ingested:
    """Metric samples of the release's window or its baseline's. No samples is refused unless
    `allow_empty` (Prometheus answering nothing: the figures are then *missing*)."""
    if window not in MetricWindow.values:
        raise IngestError(f"window must be {' or '.join(MetricWindow.values)}, not {window!r}.")
    samples = list(samples)
    if not samples and not allow_empty:
        raise IngestError("No metric samples in what was sent.", 422)
    if len(samples) > MAX_SAMPLES:
        raise IngestError(f"{len(samples):,} samples: at most {MAX_SAMPLES:,} at once.", 413)
    content_hash = _digest(
        [window, *[(s.name, s.labels, str(s.timestamp), s.value) for s in samples]]
    )
    with transaction.atomic():
        ingestion, created = _record(
            release, SourceKind.METRICS, content_hash, origin, file_names, {}
        )
        if not created:
            return Ingested(ingestion, False)
        MetricSample.objects.bulk_create(
            [
                MetricSample(
                    release=release,
                    ingestion=ingestion,
                    name=_check_text("a metric name", sample.name)[:200],
                    timestamp=sample.timestamp,
                    value=sample.value,
                    labels=dict(sample.labels),
                    window=window,
                )
                for sample in samples
            ],
            batch_size=BATCH,
        )
        ingestion.counts = {
            "samples": len(samples),
            "missing": sum(sample.value is None for sample in samples),
            "window": window,
        }
        ingestion.save(update_fields=["counts"])
        summary.refresh(release, SourceKind.METRICS)
    return Ingested(ingestion, True)


# ---- tokens ------------------------------------------------------------------------------------

TOKEN_PREFIX = "dtk_"


def create_token(
    name: str, service: Service | None, user: Any = None
) -> tuple[IngestionToken, str]:
    """A new ingestion token and its secret, which is returned once and never stored."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = IngestionToken.objects.create(
        name=name,
        service=service,
        token_hash=hash_token(secret),
        prefix=secret[:10],
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    return token, secret


# ---- Prometheus --------------------------------------------------------------------------------


def previous_release(release: Release) -> Release | None:
    """The service's release deployed last before this one."""
    if release.deployed_at is None:
        return None
    return (
        Release.objects.filter(service=release.service, deployed_at__lt=release.deployed_at)
        .order_by("-deployed_at")
        .first()
    )


def ingest_prometheus(
    release: Release,
    client: prometheus.PrometheusClient,
    origin: Origin,
    *,
    config: prometheus.MetricsConfig | None = None,
    now: datetime | None = None,
) -> list[Ingested]:
    """The release's window (from its deploy time) and its baseline's (the previous release's,
    or the same window a week earlier) queried from Prometheus and stored, one ingestion per
    window. Each window's figure (an instant query over the whole window) is stored under the
    summary's key; the per-step samples beside it as `<key>:range`. No data, NaN or Inf: the
    figure is missing."""
    if release.deployed_at is None:
        raise IngestError(
            "The release has no deploy time, so it has no metrics window: set deployed_at "
            "(POST /api/releases, or ingest --deployed-at).",
            422,
        )
    previous = previous_release(release)
    try:
        metrics = prometheus.release_metrics(
            client,
            config or prometheus.MetricsConfig(),
            service=release.service.slug,
            version=release.version,
            deploy_time=release.deployed_at,
            previous_version=previous.version if previous else None,
            previous_deploy_time=previous.deployed_at if previous else None,
            now=now,
        )
    except (prometheus.PrometheusError, prometheus.QueryTemplateError) as exc:
        raise IngestError(f"Prometheus: {exc}", 502) from None
    results = []
    for window, measured in (
        (MetricWindow.RELEASE, metrics.release),
        (MetricWindow.BASELINE, metrics.baseline),
    ):
        end = min(measured.window.end, now or timezone.now())
        figures = [
            MetricSampleRecord(key, (("over", "window"),), end, value)
            for key, value in (
                ("error_rate", measured.summary.error_rate),
                ("response_time_p95", measured.summary.response_time_p95),
            )
        ]
        steps = [
            MetricSampleRecord(
                f"{sample.name}:range", sample.labels, sample.timestamp, sample.value
            )
            for sample in measured.samples
        ]
        results.append(
            ingest_metrics(
                release,
                [*figures, *steps],
                origin,
                window=window,
                file_names=[client.where],
                allow_empty=True,
            )
        )
    return results


# ---- by hand (the release managers' form) ------------------------------------------------------


@dataclass(frozen=True)
class HandSummary:
    """The summary as a person types it; None leaves a part as it is (or as its sources give
    it). Validated by the release's own JSON schemas, like every other way in."""

    changes: list[str] | None = None
    test_results: dict[str, Any] | None = None
    deployment_metrics: dict[str, Any] | None = None


def save_by_hand(
    fields: ReleaseFields,
    typed: HandSummary,
    origin: Origin,
    *,
    junit_files: Sequence[tuple[str, IO[bytes]]] = (),
    metrics_file: tuple[str, bytes] | None = None,
    metrics_window: str = MetricWindow.RELEASE,
) -> Release:
    """A release added or corrected in a form, with its uploads, in one transaction."""
    with transaction.atomic():
        release, _ = upsert_release(fields, origin)
        changed = []
        for name in ("changes", "test_results", "deployment_metrics"):
            value = getattr(typed, name)
            if value is not None:
                setattr(release, name, value)
                changed.append(name)
        if changed:
            try:
                release.full_clean()
            except ValidationError as exc:
                raise IngestError(f"Invalid release: {_problems(exc)}", 422) from None
            release.save(update_fields=[*changed, "updated_at"])
        for name, stream in junit_files:
            ingest_junit(release, stream, name, origin)
        if metrics_file is not None:
            name, data = metrics_file
            try:
                samples = parse_metrics(data, source=name)
            except MetricsFormatError as exc:
                raise IngestError(f"Refused: {exc}.") from None
            ingest_metrics(release, samples, origin, window=metrics_window, file_names=[name])
        release.refresh_from_db()
    return release
