"""A release's routes as the policy judges them (`risk.route_signals.RouteFacts`): each route's
figures minute by minute (requests, errors, the p95 of its latency sketch) over the first
`route_window_minutes` from the deploy, and its baseline's: the release's own minutes before
the deploy time where a route has `route_min_minutes` of them, else the last minutes of the
previous release that sent traces (as the service-wide metrics fall back on the recent
releases when their baseline window is short, risk/history.py `MetricSeries.comparison`).

Bounded whatever the traffic: the busiest `route_max_routes` routes, minutes with fewer than
`route_minute_min_requests` requests left out in the query, a window of a fixed length; a p95
read off each stored sketch's message (`traces.otlp.sketches.quantile_of`) rather than by
loading it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db.models import Max, Min, QuerySet, Sum

from releases.models import Release
from risk.route_signals import MinuteFigures, RouteFacts, RouteWindows
from risk.settings import PolicySettings
from traces.models import RouteMinute, Window
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


def _previous_traced(earlier: Sequence[tuple[int, str]]) -> tuple[int, str, datetime] | None:
    """The most recent earlier release with route minutes since its deploy, and its last."""
    ids = [pk for pk, _ in earlier[:EARLIER_LOOKED_AT]]
    last = dict(
        RouteMinute.objects.filter(release_id__in=ids, window=Window.RELEASE)
        .values("release_id")
        .annotate(last=Max("minute"))
        .values_list("release_id", "last")
    )
    return next(((pk, version, last[pk]) for pk, version in earlier if pk in last), None)


def route_facts(
    release: Release, cfg: PolicySettings, earlier: Sequence[tuple[int, str]]
) -> RouteFacts | None:
    """`earlier`: the service's earlier releases (id, version), most recent first. None when
    the release has no route minutes since its deploy."""
    span = timedelta(minutes=cfg.route_window_minutes)
    least = cfg.route_minute_min_requests
    bounds = {
        window: (first, last)
        for window, first, last in RouteMinute.objects.filter(release=release)
        .values("window")
        .annotate(first=Min("minute"), last=Max("minute"))
        .values_list("window", "first", "last")
    }
    if Window.RELEASE not in bounds:
        return None
    # The first minutes from the deploy: beside the baseline in time (the same hours' traffic),
    # and a verdict that does not drift as the release keeps running.
    start = bounds[Window.RELEASE][0]
    since = RouteMinute.objects.filter(
        release=release, window=Window.RELEASE, minute__gte=start, minute__lt=start + span
    )
    busiest = list(
        since.values("route")
        .annotate(total=Sum("requests"))
        .order_by("-total", "route")
        .values_list("route", flat=True)[: cfg.route_max_routes]
    )
    current = _minutes(since.filter(route__in=busiest, requests__gte=least))
    judged = [route for route in busiest if len(current.get(route, ())) >= cfg.route_min_minutes]
    if not judged:
        return RouteFacts(release.version)
    own: dict[str, list[MinuteFigures]] = {}
    if Window.BASELINE in bounds:
        end = bounds[Window.BASELINE][1]
        own = _minutes(
            RouteMinute.objects.filter(
                release=release,
                window=Window.BASELINE,
                route__in=judged,
                minute__gt=end - span,
                requests__gte=least,
            )
        )
    short = [route for route in judged if len(own.get(route, ())) < cfg.route_min_minutes]
    before: dict[str, list[MinuteFigures]] = {}
    against = "the previous release"
    if short and (previous := _previous_traced(earlier)) is not None:
        pk, version, last = previous
        against = f"the previous release ({version})"
        before = _minutes(
            RouteMinute.objects.filter(
                release_id=pk,
                window=Window.RELEASE,
                route__in=short,
                minute__gt=last - span,
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
