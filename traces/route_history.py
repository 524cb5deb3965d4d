"""A release's routes as the policy judges them (`risk.route_signals.RouteFacts`): each route's
figures minute by minute (requests, errors, the p95 of its latency sketch) over the first
`route_window_minutes` from the deploy, and its baseline's: the release's own minutes in as
long before the deploy time where a route has `route_min_minutes` of them, else the first
minutes from its deploy of the previous release that sent spans (as the service-wide metrics
fall back on the recent releases when their baseline window is short, risk/history.py
`MetricSeries.comparison`).

Bounded whatever the traffic and however long a release ran: the windows are read by their
deploy times (no aggregate over a release's minutes), the busiest `route_max_routes` routes,
minutes with fewer than `route_minute_min_requests` requests left out in the query; a p95
read off each stored sketch's message (`traces.otlp.sketches.quantile_of`) rather than by
loading it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db.models import Min, QuerySet, Sum

from releases.models import Release
from risk.route_signals import MinuteFigures, RouteFacts, RouteWindows
from risk.settings import PolicySettings
from traces.models import RouteMinute, TraceIntake, Window
from traces.otlp.sketches import quantile_of

__all__ = ["route_facts"]

# The earlier releases looked through for the previous one that sent traces.
EARLIER_LOOKED_AT = 20


def _minutes(rows: QuerySet[RouteMinute]) -> dict[str, list[MinuteFigures]]:
    found: dict[str, list[MinuteFigures]] = defaultdict(list)
    for route, requests, errors, sketch in rows.order_by("minute").values_list(
        "route", "requests", "errors", "sketch"
    ):
        found[route].append(MinuteFigures(requests, errors, quantile_of(sketch, 0.95)))
    return found


def _previous_traced(earlier: Sequence[tuple[int, str]]) -> Release | None:
    """The most recent earlier release that sent spans (TraceIntake: a row a release)."""
    ids = [pk for pk, _ in earlier[:EARLIER_LOOKED_AT]]
    traced = set(
        TraceIntake.objects.filter(release_id__in=ids, spans__gt=0).values_list(
            "release_id", flat=True
        )
    )
    found = next((pk for pk in ids if pk in traced), None)
    return Release.objects.filter(pk=found).first() if found is not None else None


def _start(release: Release) -> datetime | None:
    """The minute the release's window starts: its deploy time's (the minutes are stored by
    it, so nothing is aggregated over a release that ran for weeks), else its first minute."""
    if release.deployed_at is not None:
        return release.deployed_at.replace(second=0, microsecond=0)
    first: datetime | None = RouteMinute.objects.filter(
        release=release, window=Window.RELEASE
    ).aggregate(first=Min("minute"))["first"]
    return first


def route_facts(
    release: Release, cfg: PolicySettings, earlier: Sequence[tuple[int, str]]
) -> RouteFacts | None:
    """`earlier`: the service's earlier releases (id, version), most recent first. None when
    the release has no route minutes since its deploy."""
    span = timedelta(minutes=cfg.route_window_minutes)
    least = cfg.route_minute_min_requests
    start = _start(release)
    if start is None:
        return None
    # The first minutes from the deploy: beside the baseline in time (the same hours' traffic),
    # and a verdict that does not drift as the release keeps running.
    since = RouteMinute.objects.filter(
        release=release, window=Window.RELEASE, minute__gte=start, minute__lt=start + span
    )
    busiest = list(
        since.values("route")
        .annotate(total=Sum("requests"))
        .order_by("-total", "route")
        .values_list("route", flat=True)[: cfg.route_max_routes]
    )
    if not busiest:
        return None
    current = _minutes(since.filter(route__in=busiest, requests__gte=least))
    judged = [route for route in busiest if len(current.get(route, ())) >= cfg.route_min_minutes]
    if not judged:
        return RouteFacts(release.version)
    own = _minutes(
        RouteMinute.objects.filter(
            release=release,
            window=Window.BASELINE,
            route__in=judged,
            minute__gte=start - span,
            minute__lte=start,
            requests__gte=least,
        )
    )
    short = [route for route in judged if len(own.get(route, ())) < cfg.route_min_minutes]
    before: dict[str, list[MinuteFigures]] = {}
    against = "the previous release"
    if short and (previous := _previous_traced(earlier)) is not None:
        against = f"the previous release ({previous.version})"
        # Its first minutes from its own deploy: the same hour of a release's life.
        if (then := _start(previous)) is not None:
            before = _minutes(
                RouteMinute.objects.filter(
                    release=previous,
                    window=Window.RELEASE,
                    route__in=short,
                    minute__gte=then,
                    minute__lt=then + span,
                    requests__gte=least,
                )
            )
    routes = []
    for route in judged:
        if route in short and before.get(route):
            baseline, said = before[route], against
        else:
            baseline, said = own.get(route, []), "the baseline window"
        routes.append(RouteWindows(route, tuple(current[route]), tuple(baseline), said))
    return RouteFacts(release.version, tuple(routes))
