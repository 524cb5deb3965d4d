"""Spans read from an OTLP request merged into a release's figures and error groups.

Attribution: a resource's `service.name` names the service (by name or slug) and its
`service.version` the release; spans of a service the token may not send, or of a release not
known yet, are refused with the reason (not kept for later: the answer tells the sender, whose
retry after the release is sent is the SDK's or the Collector's own). Each release's merge is
one transaction under a lock on its row, so two requests for one release add up.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from ddsketch.pb.ddsketch_pb2 import DDSketch as SketchMessage
from ddsketch.pb.proto import DDSketchProto
from django.db import transaction
from django.db.models import Q

from releases.models import Release, Service
from sources.models import IngestionToken
from traces.models import ErrorGroup, ErrorMinute, ErrorRelease, RouteMinute, TraceIntake
from traces.otlp.aggregate import MINUTE_NS, ReleaseAggregate, aggregate
from traces.otlp.spans import Read, SpanFacts

# Per release: a service with more routes than this has ids in its route names (a missing
# `http.route`), and more error groups than this is one failure grouped badly; either would
# grow without end. What passes them is counted in TraceIntake and shown.
MAX_ROUTES = 200
MAX_GROUPS = 100
MAX_EXEMPLARS = 5
# Releases one request may name: a Collector batches one service or a few; a body naming
# thousands would cost a lookup each.
MAX_RELEASES_A_REQUEST = 20


@dataclass(frozen=True, slots=True)
class Stored:
    accepted: int


def _at(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _minute(minute: int) -> datetime:
    return _at(minute * MINUTE_NS)


def load_sketch(data: bytes) -> object:
    message = SketchMessage()
    message.ParseFromString(bytes(data))
    return DDSketchProto.from_proto(message)


def dump_sketch(sketch: object) -> bytes:
    return DDSketchProto.to_proto(sketch).SerializeToString()


def _release_for(
    token: IngestionToken, service_name: str, version: str, read: Read, count: int
) -> Release | None:
    service = Service.objects.filter(Q(name=service_name) | Q(slug=service_name)).first()
    if service is None:
        read.reject(f"{read.what} refused: no service of that service.name (make it first)", count)
        return None
    if not token.may_ingest(service):
        what = read.what
        read.reject(f"{what} refused: the token may not send that service's {what}", count)
        return None
    release = Release.objects.filter(service=service, version=version).first()
    if release is None:
        read.reject(
            f"{read.what} refused: no release of their service.version yet "
            "(send the release first)",
            count,
        )
    return release


def ingest(token: IngestionToken, read: Read) -> Stored:
    """Merge the request's spans into their releases; refusals are added to `read`."""
    by_release: dict[tuple[str, str], list[SpanFacts]] = defaultdict(list)
    for span in read.spans:
        by_release[(span.service, span.version)].append(span)
    accepted = 0
    for index, ((service_name, version), spans) in enumerate(by_release.items()):
        if index >= MAX_RELEASES_A_REQUEST:
            read.reject(
                f"{read.what} refused: more than {MAX_RELEASES_A_REQUEST} releases in one request",
                len(spans),
            )
            continue
        release = _release_for(token, service_name, version, read, len(spans))
        if release is None:
            continue
        deployed = release.deployed_at
        deployed_ns = int(deployed.timestamp() * 1e9) if deployed is not None else None
        _merge(release, aggregate(spans, deployed_ns))
        accepted += len(spans)
    return Stored(accepted=accepted)


def _merge_routes(release: Release, batch: ReleaseAggregate, intake: TraceIntake) -> None:
    """The batch's route minutes into the release's: the rows it touches read in one query,
    new ones created and the others updated in bulk (a request of 512 spans over 20 routes
    is 3 queries, not 40)."""
    routes = set(
        RouteMinute.objects.filter(release=release).values_list("route", flat=True).distinct()
    )
    kept = {}
    for (route, minute, window), figures in batch.routes.items():
        if route not in routes and len(routes) >= MAX_ROUTES:
            intake.routes_dropped += figures.requests
            continue
        routes.add(route)
        kept[(route, _minute(minute), window)] = figures
    if not kept:
        return
    minutes = {minute for _, minute, _ in kept}
    existing = {
        (row.route, row.minute, row.window): row
        for row in RouteMinute.objects.filter(
            release=release, route__in={r for r, _, _ in kept}, minute__in=minutes
        )
    }
    created, updated = [], []
    for key, figures in kept.items():
        row = existing.get(key)
        if row is None:
            route, minute, window = key
            created.append(
                RouteMinute(
                    release=release,
                    route=route,
                    minute=minute,
                    window=window,
                    requests=figures.requests,
                    errors=figures.errors,
                    sketch=dump_sketch(figures.sketch),
                )
            )
            continue
        sketch = load_sketch(row.sketch)
        sketch.merge(figures.sketch)  # type: ignore[attr-defined]
        row.requests += figures.requests
        row.errors += figures.errors
        row.sketch = dump_sketch(sketch)
        updated.append(row)
    RouteMinute.objects.bulk_create(created)
    RouteMinute.objects.bulk_update(updated, ["requests", "errors", "sketch"])


@transaction.atomic
def _merge(release: Release, batch: ReleaseAggregate) -> None:
    Release.objects.select_for_update().filter(pk=release.pk).first()
    intake, _ = TraceIntake.objects.get_or_create(release=release)
    intake.spans += batch.spans
    intake.log_records += batch.log_records
    _merge_routes(release, batch, intake)
    groups_here = ErrorRelease.objects.filter(release=release).count()
    for fingerprint, found in batch.errors.items():
        group = ErrorGroup.objects.filter(service=release.service, fingerprint=fingerprint).first()
        here = ErrorRelease.objects.filter(group=group, release=release).first() if group else None
        if here is None and groups_here >= MAX_GROUPS:
            intake.groups_dropped += found.total
            continue
        first, last = _at(found.first_ns), _at(found.last_ns)
        if group is None:
            group = ErrorGroup.objects.create(
                service=release.service,
                fingerprint=fingerprint,
                exception_type=found.grouped.exception_type,
                message=found.sample.message,
                stacktrace=found.sample.stacktrace,
                frames=[[f.path, f.line, f.function] for f in found.grouped.frames],
                first_seen=first,
                last_seen=last,
                first_release=release,
            )
        else:
            group.first_seen = min(group.first_seen, first)
            group.last_seen = max(group.last_seen, last)
            group.save(update_fields=["first_seen", "last_seen"])
        if here is None:
            groups_here += 1
            here = ErrorRelease(group=group, release=release, first_seen=first, last_seen=last)
        here.first_seen = min(here.first_seen, first)
        here.last_seen = max(here.last_seen, last)
        here.exemplars = (here.exemplars + [t for t in found.exemplars if t not in here.exemplars])[
            :MAX_EXEMPLARS
        ]
        here.save()
        for (route, minute, window), count in found.counts.items():
            row, created = ErrorMinute.objects.get_or_create(
                group=group,
                release=release,
                route=route,
                minute=_minute(minute),
                window=window,
                defaults={"count": count},
            )
            if not created:
                row.count += count
                row.save(update_fields=["count"])
    intake.save()


def purge(before: datetime) -> tuple[int, int]:
    """Deletes the per-minute figures older than `before`: (route minutes, error minutes).
    Error groups and the releases they were seen in stay, so an old group never reads as new."""
    routes, _ = RouteMinute.objects.filter(minute__lt=before).delete()
    errors, _ = ErrorMinute.objects.filter(minute__lt=before).delete()
    return routes, errors
