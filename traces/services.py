"""Spans read from an OTLP request merged into a release's figures and error groups.

Attribution: a resource's `service.name` names the service (by name or slug) and its
`service.version` the release; spans of a service the token may not send are refused with the
reason; spans of a version with no release yet are held until it arrives (`traces.held`, said
in the answer) and merged into it when it is made (`attribute_held`, in the transaction that
makes it).

A request's merge is one transaction, whatever the number of releases it names: a failure
anywhere keeps nothing of it, so the exporter's retry is counted once. The releases' rows are
locked in one query, in the order of their ids, then the services' rows of the versions held
(the order `attribute_held` takes them in too: a release, then its service), so two requests
for one release add up and none waits on another in a circle.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import Q

from releases.models import Release, Service
from sources.models import IngestionToken
from traces import held
from traces.models import ErrorGroup, ErrorMinute, ErrorRelease, RouteMinute, TraceIntake
from traces.otlp.aggregate import MINUTE_NS, ReleaseAggregate, aggregate
from traces.otlp.samples import merge_samples
from traces.otlp.sketches import dump_sketch, load_sketch, merge_into
from traces.otlp.spans import Read, SpanFacts

__all__ = [
    "MAX_GROUPS",
    "MAX_ROUTES",
    "Stored",
    "attribute_held",
    "dump_sketch",
    "ingest",
    "ingest_into",
    "load_sketch",
    "purge",
]

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
    held: int = 0


def _at(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _minute(minute: int) -> datetime:
    return _at(minute * MINUTE_NS)


def _service_for(
    token: IngestionToken, service_name: str, read: Read, count: int
) -> Service | None:
    service = Service.objects.filter(Q(name=service_name) | Q(slug=service_name)).first()
    if service is None:
        read.reject(f"{read.what} refused: no service of that service.name (make it first)", count)
        return None
    if not token.may_ingest(service):
        what = read.what
        read.reject(f"{what} refused: the token may not send that service's {what}", count)
        return None
    return service


def ingest(token: IngestionToken, read: Read) -> Stored:
    """Merge the request's spans into their releases, or hold them for releases not sent
    yet; refusals and holds are said in `read`."""

    def service_for(name: str, count: int) -> Service | None:
        return _service_for(token, name, read, count)

    return _ingest(read, service_for)


def ingest_into(service: Service, read: Read) -> Stored:
    """Merge spans read from a file into `service`'s releases by their `service.version`,
    whatever service name their resource gives (the evals' scenarios: their service is named
    per scenario, their files for the service they describe)."""
    return _ingest(read, lambda _name, _count: service)


def _ingest(read: Read, service_for: Callable[[str, int], Service | None]) -> Stored:
    by_release: dict[tuple[str, str], list[SpanFacts]] = defaultdict(list)
    for span in read.spans:
        by_release[(span.service, span.version)].append(span)
    wanted: list[tuple[Service, str, list[SpanFacts]]] = []
    for index, ((service_name, version), spans) in enumerate(by_release.items()):
        if index >= MAX_RELEASES_A_REQUEST:
            read.reject(
                f"{read.what} refused: more than {MAX_RELEASES_A_REQUEST} releases in one request",
                len(spans),
            )
            continue
        service = service_for(service_name, len(spans))
        if service is not None:
            wanted.append((service, version, spans))
    if not wanted:
        return Stored(accepted=0)
    accepted = kept = 0
    with transaction.atomic():
        known = Q()
        for service, version, _ in wanted:
            known |= Q(service=service, version=version)
        releases = {
            (release.service_id, release.version): release
            for release in Release.objects.select_for_update().filter(known).order_by("pk")
        }
        unknown = []
        for service, version, spans in wanted:
            release = releases.get((service.pk, version))
            if release is None:
                unknown.append((service, version, spans))
                continue
            _merge(release, aggregate(spans, _deployed_ns(release)))
            accepted += len(spans)
        if unknown:
            held_now = _hold(unknown, read)
            accepted += held_now
            kept += held_now
    return Stored(accepted=accepted, held=kept)


def _deployed_ns(release: Release) -> int | None:
    deployed = release.deployed_at
    return int(deployed.timestamp() * 1e9) if deployed is not None else None


def _hold(unknown: list[tuple[Service, str, list[SpanFacts]]], read: Read) -> int:
    """Spans of versions without a release: held (`traces.held`), each service's row locked
    first, so that a release made at the same moment either is seen here (its spans merged
    into it) or finds them held when it takes the lock (`attribute_held`)."""
    hours = held.hold_hours()
    accepted = 0
    locked: set[int] = set()
    for service, version, spans in sorted(unknown, key=lambda item: (item[0].pk, item[1])):
        if hours <= 0:
            read.reject(
                f"{read.what} refused: no release of their service.version yet "
                "(send the release first)",
                len(spans),
            )
            continue
        if service.pk not in locked:
            _lock_service(service)
            held.expire(service)
            locked.add(service.pk)
        release = (
            Release.objects.select_for_update().filter(service=service, version=version).first()
        )
        if release is not None:  # made and committed since the request's first look
            _merge(release, aggregate(spans, _deployed_ns(release)))
            accepted += len(spans)
            continue
        accepted += held.hold(service, version, spans, read)
    return accepted


def _lock_service(service: Service) -> None:
    list(Service.objects.select_for_update().filter(pk=service.pk).values_list("pk", flat=True))


def attribute_held(release: Release) -> int:
    """Merge the spans held for a release just made into it: the spans merged. Called in the
    transaction that made it (`sources.release_hooks`), which holds the release's row; the
    service's row is locked next, as `_hold` does after its releases."""
    _lock_service(release.service)
    held.expire(release.service)
    batch = held.take(release)
    if batch is None:
        return 0
    _merge(release, batch)
    return batch.spans + batch.log_records


def _merge_routes(release: Release, batch: ReleaseAggregate, intake: TraceIntake) -> None:
    """The batch's route minutes into the release's: the rows it touches read in one query,
    then written in one upsert, their sketches merged as messages (`traces.otlp.sketches`).
    The release's routes are counted (for the cap) only when the batch names a route not
    stored yet: the count reads every route minute of the release, the rest only the
    batch's."""
    batch_routes = {route for route, _, _ in batch.routes}
    if not batch_routes:
        return
    stored = set(
        RouteMinute.objects.filter(release=release, route__in=batch_routes)
        .values_list("route", flat=True)
        .distinct()
    )
    routes = stored
    if batch_routes - stored:
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
    existing = {
        (row.route, row.minute, row.window): row
        for row in RouteMinute.objects.filter(
            release=release,
            route__in={r for r, _, _ in kept},
            minute__in={m for _, m, _ in kept},
        ).only("route", "minute", "window", "requests", "errors", "sketch")
    }
    rows = []
    for (route, minute, window), figures in kept.items():
        row = existing.get((route, minute, window))
        rows.append(
            RouteMinute(
                release=release,
                route=route,
                minute=minute,
                window=window,
                requests=figures.requests + (row.requests if row else 0),
                errors=figures.errors + (row.errors if row else 0),
                sketch=(
                    merge_into(row.sketch, figures.sketch)
                    if row is not None
                    else dump_sketch(figures.sketch)
                ),
            )
        )
    RouteMinute.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["release", "route", "minute", "window"],
        update_fields=["requests", "errors", "sketch"],
    )


def _merge_errors(release: Release, batch: ReleaseAggregate, intake: TraceIntake) -> None:
    """The batch's error groups into the service's and the release's: the groups, their rows
    of this release and their minutes each read in one query and written in one statement."""
    if not batch.errors:
        return
    groups = {
        group.fingerprint: group
        for group in ErrorGroup.objects.filter(
            service=release.service, fingerprint__in=list(batch.errors)
        )
    }
    heres = {
        here.group_id: here
        for here in ErrorRelease.objects.filter(release=release, group__in=groups.values())
    }
    groups_here = ErrorRelease.objects.filter(release=release).count()
    created, seen, kept = [], [], []
    for fingerprint, found in batch.errors.items():
        group = groups.get(fingerprint)
        if (group is None or group.pk not in heres) and groups_here >= MAX_GROUPS:
            intake.groups_dropped += found.total
            continue
        first, last = _at(found.first_ns), _at(found.last_ns)
        if group is None:
            group = ErrorGroup(
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
            created.append(group)
        else:
            group.first_seen = min(group.first_seen, first)
            group.last_seen = max(group.last_seen, last)
            seen.append(group)
        if group.pk is None or group.pk not in heres:
            groups_here += 1
        kept.append((group, found, first, last))
    ErrorGroup.objects.bulk_create(created)
    if seen:
        ErrorGroup.objects.bulk_update(seen, ["first_seen", "last_seen"])
    releases, minutes = [], {}
    for group, found, first, last in kept:
        here = heres.get(group.pk)
        exemplars = here.exemplars if here else []
        releases.append(
            ErrorRelease(
                group=group,
                release=release,
                first_seen=min(here.first_seen, first) if here else first,
                last_seen=max(here.last_seen, last) if here else last,
                exemplars=(exemplars + [t for t in found.exemplars if t not in exemplars])[
                    :MAX_EXEMPLARS
                ],
                sample_traces=merge_samples(here.sample_traces if here else [], found.samples),
            )
        )
        for (route, minute, window), count in found.counts.items():
            key = (group.pk, route, _minute(minute), window)
            minutes[key] = minutes.get(key, 0) + count
    ErrorRelease.objects.bulk_create(
        releases,
        update_conflicts=True,
        unique_fields=["group", "release"],
        update_fields=["first_seen", "last_seen", "exemplars", "sample_traces"],
    )
    existing = {
        (row.group_id, row.route, row.minute, row.window): row.count
        for row in ErrorMinute.objects.filter(
            release=release,
            group__in={key[0] for key in minutes},
            minute__in={key[2] for key in minutes},
        ).only("group_id", "route", "minute", "window", "count")
    }
    ErrorMinute.objects.bulk_create(
        [
            ErrorMinute(
                group_id=group_id,
                release=release,
                route=route,
                minute=minute,
                window=window,
                count=count + existing.get((group_id, route, minute, window), 0),
            )
            for (group_id, route, minute, window), count in minutes.items()
        ],
        update_conflicts=True,
        unique_fields=["group", "release", "route", "minute", "window"],
        update_fields=["count"],
    )


def _merge(release: Release, batch: ReleaseAggregate) -> None:
    """One release's batch, in the caller's transaction, which holds the release's row locked:
    a dozen statements whatever the batch's size."""
    intake, _ = TraceIntake.objects.get_or_create(release=release)
    intake.spans += batch.spans
    intake.log_records += batch.log_records
    _merge_routes(release, batch, intake)
    _merge_errors(release, batch, intake)
    intake.save()


def purge(before: datetime) -> tuple[int, int]:
    """Deletes the per-minute figures older than `before`: (route minutes, error minutes).
    Error groups and the releases they were seen in stay, so an old group never reads as new.
    Held spans past their hold time go too (`traces.held.expire`)."""
    routes, _ = RouteMinute.objects.filter(minute__lt=before).delete()
    errors, _ = ErrorMinute.objects.filter(minute__lt=before).delete()
    held.expire()
    return routes, errors
