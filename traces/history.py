"""A release's error groups as the policy reads them (`risk.trace_signals.TraceFacts`): each
group's occurrences since the deploy time and before it, whether an earlier release of the
service showed it, and its busiest route with that route's requests; with its routes' figures
minute by minute (traces/route_history.py), the signals they give, which
`sources.judging.judge_release` adds to the verdict through its hook (sources/judging_hooks.py,
installed by `TracesConfig.ready`)."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Sum

from releases.models import Release
from releases.release_order import earlier_releases
from risk.history import History
from risk.route_signals import route_regressions
from risk.settings import PolicySettings
from risk.signal import Signal
from risk.trace_signals import (
    ErrorGroupFacts,
    TraceFacts,
    new_error_groups,
    regressed_error_groups,
)
from sources.models import CommitFile
from sources.parsers.tracebacks import RepoPaths
from traces.models import (
    ErrorGroup,
    ErrorMinute,
    ErrorRelease,
    RouteMinute,
    TraceIntake,
    Window,
)
from traces.route_history import route_facts
from traces.selectors import previous_traced
from traces.suspects import suspect_for

# The earlier releases a group is looked for in: "seen before" reads ErrorRelease, which
# outlives the minutes' retention.
EARLIER = 200


def trace_facts(release: Release, earlier: list[int] | None = None) -> TraceFacts | None:
    """None for a release no span was sent for: the policy then says nothing of traces.
    `earlier`: the service's earlier releases' ids, most recent first (read when not given)."""
    counts = (
        ErrorMinute.objects.filter(release=release)
        .values("group_id", "route", "window")
        .annotate(total=Sum("count"))
    )
    per_group: dict[int, dict[str, int]] = defaultdict(lambda: {"baseline": 0, "release": 0})
    routes: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in counts:
        per_group[row["group_id"]][row["window"]] += row["total"]
        if row["window"] == Window.RELEASE:
            routes[row["group_id"]][row["route"]] += row["total"]
    if not per_group:
        return None
    if earlier is None:
        earlier = list(earlier_releases(release).values_list("id", flat=True)[:EARLIER])
    # ErrorRelease, not the minutes: it outlives the minutes' retention.
    seen: dict[int, set[int]] = defaultdict(set)
    for group_id, release_id in ErrorRelease.objects.filter(
        group_id__in=per_group, release_id__in=earlier
    ).values_list("group_id", "release_id"):
        seen[group_id].add(release_id)
    previous = previous_traced(earlier)
    requests = dict(
        RouteMinute.objects.filter(release=release, window=Window.RELEASE)
        .values("route")
        .annotate(total=Sum("requests"))
        .values_list("route", "total")
    )
    groups = []
    repo: RepoPaths | None = None
    for group in ErrorGroup.objects.filter(pk__in=per_group):
        if repo is None:
            repo = _repo_paths(release)
        by_route = routes.get(group.pk, {})
        route = max(by_route, key=lambda r: (by_route[r], r), default="")
        culprit = group.frames[-1] if group.frames else None
        groups.append(
            ErrorGroupFacts(
                fingerprint=group.fingerprint,
                exception_type=group.exception_type,
                path=_shown_path(culprit[0]) if culprit else "",
                function=culprit[2] if culprit else "",
                count=per_group[group.pk]["release"],
                baseline_count=per_group[group.pk]["baseline"],
                seen_before=bool(seen.get(group.pk)),
                seen_in_previous=previous in seen.get(group.pk, set()),
                route=route,
                route_requests=requests.get(route, 0),
                suspect=suspect_for(release, group),
                frame_paths=tuple(
                    repo.match(frame[0]) or frame[0] for frame in group.frames if frame
                ),
            )
        )
    return TraceFacts(version=release.version, groups=tuple(groups))


def _repo_paths(release: Release) -> RepoPaths:
    """The files the release's commits touched, to read a deployed frame path as the
    repository's (`/srv/app/payments/charge.py` is `payments/charge.py`) before the policy
    asks which critical area it lies in; a frame in a file the range did not touch is read as
    deployed, where the same globs (`*/payments/*`) still find its area."""
    return RepoPaths(
        CommitFile.objects.filter(commit__release=release).values_list("path", flat=True)
    )


def _shown_path(path: str) -> str:
    # A deployed path's directory is the host's, not the repository's (`/srv/app/shop/x.py`).
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    return "/".join(parts[-2:])


def trace_signals(release: Release, settings: PolicySettings, past: History) -> list[Signal]:
    # One query for a release no span or log record was sent for (most, and every one of a
    # service without traces): the verdict's query budget (bench/release_summary.py).
    if not TraceIntake.objects.filter(release=release).exists():
        return []
    earlier = list(earlier_releases(release).values_list("id", "version")[:EARLIER])
    facts = trace_facts(release, [pk for pk, _ in earlier])
    routes = route_facts(release, settings, earlier)
    return (
        new_error_groups(facts, settings)
        + regressed_error_groups(facts, settings)
        + route_regressions(routes, settings)
    )
