"""Spans of a version that has no release yet: held, folded as they arrive, until the release
is sent (`traces.services.attribute_held` merges them into it, in the transaction that makes
the release) or their hold time passes (`DETECTIVE_OTLP_HOLD_HOURS`, 24 by default).

An SDK starts sending spans of a new version the moment the new version serves; the CI job
that sends the release often runs a minute later, or after a canary. Refused, those spans were
lost (an exporter retries a partial success never, and a failure only for seconds).

Kept as the release's own figures are (route minutes with a latency sketch, error groups with
their counts per route and minute, a sample, exemplars and sample traces), without a window:
the deploy time is the release's, unknown until it arrives; on arrival a minute that ended
before the deploy time counts as the baseline, any other as the release (the minute of the
deploy itself goes to the release).

Bounded per service: `MAX_HELD_VERSIONS` versions, `MAX_HELD_ROWS` route minutes and error
counts per route and minute, `MAX_HELD_GROUPS` error groups. A batch that would pass one is
refused whole, with the reason, and nothing of it is kept. Expired versions are deleted on the
service's next write (a hold or a release) and by `manage.py purge_traces` (daily).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Sum
from django.utils import timezone

from releases.models import Release, Service
from sources.parsers.tracebacks import Frame
from traces.models import HeldError, HeldRouteMinute, HeldVersion
from traces.otlp.aggregate import (
    MINUTE_NS,
    ErrorAggregate,
    ReleaseAggregate,
    RouteMinute,
    Window,
    aggregate,
)
from traces.otlp.grouping import Grouped
from traces.otlp.samples import merge_samples
from traces.otlp.sketches import dump_sketch, load_sketch, merge_into
from traces.otlp.spans import ExceptionFacts, Read, SpanFacts

__all__ = [
    "MAX_HELD_GROUPS",
    "MAX_HELD_ROWS",
    "MAX_HELD_VERSIONS",
    "expire",
    "hold",
    "hold_hours",
    "take",
]

log = logging.getLogger(__name__)

MAX_HELD_VERSIONS = 5
MAX_HELD_ROWS = 5_000
MAX_HELD_GROUPS = 100
MAX_EXEMPLARS = 5


def hold_hours() -> float:
    return float(settings.DETECTIVE_OTLP_HOLD_HOURS)


def _at(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _ns(moment: datetime) -> int:
    return round(moment.timestamp() * 10**9)


def expire(service: Service | None = None, now: datetime | None = None) -> tuple[int, int]:
    """Deletes the held versions past their time (of `service`, or all): (versions, spans)."""
    found = HeldVersion.objects.filter(expires_at__lt=now or timezone.now())
    if service is not None:
        found = found.filter(service=service)
    gone = list(found.values_list("pk", "service_id", "version", "spans"))
    if not gone:
        return 0, 0
    for _pk, service_id, version, spans in gone:
        # Accepted with a note that they were held; said once more where operators look.
        log.warning(
            "%s held spans of version %r of service %s expired before its release arrived",
            spans,
            version,
            service_id,
        )
    HeldVersion.objects.filter(pk__in=[row[0] for row in gone]).delete()
    return len(gone), sum(row[3] for row in gone)


def _refuse(read: Read, count: int, why: str) -> int:
    read.reject(f"{read.what} refused: {why} (send the release first)", count)
    return 0


def hold(service: Service, version: str, spans: Sequence[SpanFacts], read: Read) -> int:
    """Hold `spans` of `service`'s `version`, which has no release: the number held (0 when
    a cap refused them, said in `read`). The caller holds the service's row locked."""
    batch = aggregate(spans, None)
    now = timezone.now()
    held = HeldVersion.objects.filter(service=service, version=version).first()
    totals = HeldVersion.objects.filter(service=service).aggregate(
        versions=Count("id"), rows=Sum("rows")
    )
    if held is None and totals["versions"] >= MAX_HELD_VERSIONS:
        why = f"{MAX_HELD_VERSIONS} versions of this service already wait for their release"
        return _refuse(read, len(spans), why)
    route_keys = {(route, _at(minute * MINUTE_NS)) for route, minute, _ in batch.routes}
    routes: dict[tuple[str, datetime], HeldRouteMinute] = {}
    errors: dict[str, HeldError] = {}
    if held is not None and route_keys:
        routes = {
            (row.route, row.minute): row
            for row in HeldRouteMinute.objects.filter(
                held=held,
                route__in={r for r, _ in route_keys},
                minute__in={m for _, m in route_keys},
            )
        }
    if held is not None and batch.errors:
        errors = {
            row.fingerprint: row
            for row in HeldError.objects.filter(held=held, fingerprint__in=list(batch.errors))
        }
    counts = {
        fingerprint: _counts(errors[fingerprint].counts if fingerprint in errors else [])
        for fingerprint in batch.errors
    }
    new_rows = len(route_keys - routes.keys()) + sum(
        len({(route, minute) for route, minute, _ in found.counts} - counts[key].keys())
        for key, found in batch.errors.items()
    )
    if (totals["rows"] or 0) + new_rows > MAX_HELD_ROWS:
        why = (
            f"this service's spans held for versions not sent yet are at their cap "
            f"({MAX_HELD_ROWS:,} route and error minutes)"
        )
        return _refuse(read, len(spans), why)
    new_groups = len(batch.errors.keys() - errors.keys())
    if new_groups and HeldError.objects.filter(held__service=service).count() + new_groups > (
        MAX_HELD_GROUPS
    ):
        why = f"this service's held error groups are at their cap ({MAX_HELD_GROUPS})"
        return _refuse(read, len(spans), why)
    if held is None:
        held = HeldVersion.objects.create(
            service=service,
            version=version,
            held_since=now,
            expires_at=now + timedelta(hours=hold_hours()),
        )
    held.spans += batch.spans
    held.log_records += batch.log_records
    held.rows += new_rows
    held.save(update_fields=["spans", "log_records", "rows"])
    _hold_routes(held, batch, routes)
    _hold_errors(held, batch, errors, counts)
    read.note(
        f"{read.what} of version {version}, which has no release yet, held for up to "
        f"{hold_hours():g} h (until {held.expires_at:%Y-%m-%d %H:%M} UTC) until its release "
        "arrives",
        len(spans),
    )
    return len(spans)


def _counts(stored: list[Any]) -> dict[tuple[str, int], int]:
    return {(route, minute): count for route, minute, count in stored}


def _hold_routes(
    held: HeldVersion,
    batch: ReleaseAggregate,
    routes: dict[tuple[str, datetime], HeldRouteMinute],
) -> None:
    rows = []
    for (route, minute, _window), figures in batch.routes.items():
        at = _at(minute * MINUTE_NS)
        row = routes.get((route, at))
        rows.append(
            HeldRouteMinute(
                held=held,
                route=route,
                minute=at,
                requests=figures.requests + (row.requests if row else 0),
                errors=figures.errors + (row.errors if row else 0),
                sketch=(
                    merge_into(row.sketch, figures.sketch) if row else dump_sketch(figures.sketch)
                ),
            )
        )
    HeldRouteMinute.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["held", "route", "minute"],
        update_fields=["requests", "errors", "sketch"],
    )


def _hold_errors(
    held: HeldVersion,
    batch: ReleaseAggregate,
    errors: dict[str, HeldError],
    counts: dict[str, dict[tuple[str, int], int]],
) -> None:
    rows = []
    for fingerprint, found in batch.errors.items():
        row = errors.get(fingerprint)
        merged = counts[fingerprint]
        for (route, minute, _window), count in found.counts.items():
            merged[(route, minute)] = merged.get((route, minute), 0) + count
        exemplars = row.exemplars if row else []
        first, last = _at(found.first_ns), _at(found.last_ns)
        rows.append(
            HeldError(
                held=held,
                fingerprint=fingerprint,
                exception_type=found.grouped.exception_type,
                message=found.sample.message,
                stacktrace=found.sample.stacktrace,
                frames=[[f.path, f.line, f.function] for f in found.grouped.frames],
                first_seen=min(row.first_seen, first) if row else first,
                last_seen=max(row.last_seen, last) if row else last,
                counts=[[route, minute, count] for (route, minute), count in merged.items()],
                exemplars=(exemplars + [t for t in found.exemplars if t not in exemplars])[
                    :MAX_EXEMPLARS
                ],
                sample_traces=merge_samples(row.sample_traces if row else [], found.samples),
            )
        )
    if rows:
        # The first sample stays (as an error group's does): the update leaves it.
        HeldError.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["held", "fingerprint"],
            update_fields=["first_seen", "last_seen", "counts", "exemplars", "sample_traces"],
        )


def _window(minute: int, deployed_ns: int | None) -> Window:
    ends = (minute + 1) * MINUTE_NS
    return "baseline" if deployed_ns is not None and ends <= deployed_ns else "release"


def take(release: Release) -> ReleaseAggregate | None:
    """The spans held for `release`'s version, as a batch to merge into it (windows by its
    deploy time), deleted from the held ones; None when none is held."""
    held = HeldVersion.objects.filter(service_id=release.service_id, version=release.version)
    found = held.first()
    if found is None:
        return None
    deployed_ns = _ns(release.deployed_at) if release.deployed_at is not None else None
    batch = ReleaseAggregate(spans=found.spans, log_records=found.log_records)
    for row in found.routes.all():
        minute = _ns(row.minute) // MINUTE_NS
        batch.routes[(row.route, minute, _window(minute, deployed_ns))] = RouteMinute(
            requests=row.requests, errors=row.errors, sketch=load_sketch(row.sketch)
        )
    for error in found.errors.all():
        frames = tuple(Frame(path, line, function, False) for path, line, function in error.frames)
        batch.errors[error.fingerprint] = ErrorAggregate(
            grouped=Grouped(error.fingerprint, error.exception_type, frames),
            sample=ExceptionFacts(error.exception_type, error.message, error.stacktrace),
            first_ns=_ns(error.first_seen),
            last_ns=_ns(error.last_seen),
            counts={
                (route, minute, _window(minute, deployed_ns)): count
                for route, minute, count in error.counts
            },
            exemplars=list(error.exemplars),
            samples=list(error.sample_traces),
        )
    found.delete()
    return batch
