"""Reads of a release's traces: what the drill-down (`GET /api/releases/<v>/traces`), the
agent's `get_observability_traces` and the release page show. Error groups new, regressed or
ongoing with their counts and routes; the routes with the baseline's and the release's figures
(requests, errors, error rate, p50/p95/p99 from the minutes' merged sketches); one sample trace
with its spans; what the caps dropped."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Q, Sum

from releases.models import Release
from releases.release_order import earlier_releases
from traces.models import ErrorGroup, ErrorMinute, ErrorRelease, RouteMinute, TraceIntake, Window
from traces.otlp.aggregate import new_sketch
from traces.services import load_sketch
from traces.suspects import suspect_for

MAX_GROUPS_SHOWN = 20
MAX_ROUTES_SHOWN = 50
MAX_STACK_SHOWN = 4_000
STATUS_ORDER = {"new": 0, "regressed": 1, "ongoing": 2}


def _figures(requests: int, errors: int, sketch: Any) -> dict[str, Any]:
    def quantile(q: float) -> float | None:
        value = sketch.get_quantile_value(q) if sketch.count else None
        return round(value, 1) if value is not None else None

    return {
        "requests": requests,
        "errors": errors,
        "error_rate": round(errors / requests, 4) if requests else None,
        "p50_ms": quantile(0.5),
        "p95_ms": quantile(0.95),
        "p99_ms": quantile(0.99),
    }


def route_figures(release: Release) -> list[dict[str, Any]]:
    merged: dict[tuple[str, str], list[Any]] = {}
    for route, window, requests, errors, sketch in RouteMinute.objects.filter(
        release=release
    ).values_list("route", "window", "requests", "errors", "sketch"):
        found = merged.setdefault((route, window), [0, 0, new_sketch()])
        found[0] += requests
        found[1] += errors
        found[2].merge(load_sketch(sketch))
    routes = sorted({route for route, _ in merged})
    rows = []
    for route in routes:
        row: dict[str, Any] = {"route": route}
        for window in (Window.BASELINE, Window.RELEASE):
            found = merged.get((route, window))
            row[str(window)] = _figures(*found) if found else None
        rows.append(row)
    rows.sort(key=lambda r: -((r["release"] or {}).get("error_rate") or 0))
    return rows[:MAX_ROUTES_SHOWN]


def previous_traced(earlier: list[int]) -> int | None:
    """The most recent of `earlier` (release ids, most recent first) that sent spans or log
    records: a release that sent none says nothing of a group's absence, so a group back after
    it is not regressed. The policy (`traces.history`) and the drill-down read it alike."""
    traced = set(
        TraceIntake.objects.filter(release_id__in=earlier)
        .filter(Q(spans__gt=0) | Q(log_records__gt=0))
        .values_list("release_id", flat=True)
    )
    return next((pk for pk in earlier if pk in traced), None)


def _status(group_id: int, baseline: int, previous: int | None, seen: dict[int, set[int]]) -> str:
    where = seen.get(group_id, set())
    if not where and not baseline:
        return "new"
    if where and previous not in where:
        return "regressed"
    return "ongoing"


def _sample(traces: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The first sample trace kept of a group (`traces.otlp.samples`), or None."""
    return traces[0] if traces else None


def release_traces(
    release: Release, *, with_suspects: bool = True, with_samples: bool = False
) -> dict[str, Any]:
    """The release's error groups and routes; `with_samples` adds each group's sample trace
    (the release page), else only the top group's is given (`sample_trace`)."""
    counts: dict[int, dict[str, int]] = defaultdict(lambda: {"baseline": 0, "release": 0})
    routes: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in (
        ErrorMinute.objects.filter(release=release)
        .values("group_id", "route", "window")
        .annotate(total=Sum("count"))
    ):
        counts[row["group_id"]][row["window"]] += row["total"]
        routes[row["group_id"]][row["route"] or "(no route)"] += row["total"]
    earlier = list(earlier_releases(release).values_list("id", flat=True)[:50])
    seen: dict[int, set[int]] = defaultdict(set)
    for group_id, release_id in ErrorRelease.objects.filter(
        group_id__in=counts, release_id__in=earlier
    ).values_list("group_id", "release_id"):
        seen[group_id].add(release_id)
    previous = previous_traced(earlier)
    exemplars, samples = {}, {}
    for group_id, ids, traces in ErrorRelease.objects.filter(release=release).values_list(
        "group_id", "exemplars", "sample_traces"
    ):
        exemplars[group_id], samples[group_id] = ids, traces
    groups = []
    for group in ErrorGroup.objects.filter(pk__in=counts):
        culprit = group.frames[-1] if group.frames else None
        suspect = suspect_for(release, group) if with_suspects else None
        groups.append(
            {
                "fingerprint": group.fingerprint,
                "status": _status(group.pk, counts[group.pk]["baseline"], previous, seen),
                "exception_type": group.exception_type,
                "message": group.message[:300],
                "frame": (
                    {"path": culprit[0], "line": culprit[1], "function": culprit[2]}
                    if culprit
                    else None
                ),
                "count": counts[group.pk]["release"],
                "baseline_count": counts[group.pk]["baseline"],
                "routes": dict(sorted(routes[group.pk].items(), key=lambda kv: -kv[1])[:10]),
                "first_seen": group.first_seen.isoformat(),
                "last_seen": group.last_seen.isoformat(),
                "exemplar_trace_ids": exemplars.get(group.pk, []),
                "sample_trace": _sample(samples.get(group.pk)),
                "stacktrace": group.stacktrace[:MAX_STACK_SHOWN],
                "suspect": (
                    {
                        "sha": suspect.sha,
                        "subject": suspect.subject,
                        "author": suspect.author,
                        "path": suspect.path,
                        "line": suspect.line,
                        "reason": suspect.reason,
                    }
                    if suspect
                    else None
                ),
            }
        )
    groups.sort(key=lambda g: (STATUS_ORDER[g["status"]], -g["count"]))
    total = len(groups)
    groups = groups[:MAX_GROUPS_SHOWN]
    top = next((g for g in groups if g["sample_trace"]), None)
    sample = (
        {
            "fingerprint": top["fingerprint"],
            "exception_type": top["exception_type"],
            "status": top["status"],
            **top["sample_trace"],
        }
        if top
        else None
    )
    if not with_samples:
        for group in groups:
            del group["sample_trace"]
    intake = TraceIntake.objects.filter(release=release).first()
    return {
        "release": release.version,
        "service": release.service.slug,
        # One trace of the first group listed that has one (new and regressed come first):
        # what the failing request did, span by span.
        "sample_trace": sample,
        "error_groups": groups,
        "error_groups_total": total,
        "routes": route_figures(release),
        "spans": intake.spans if intake else 0,
        "log_records": intake.log_records if intake else 0,
        "routes_dropped": intake.routes_dropped if intake else 0,
        "groups_dropped": intake.groups_dropped if intake else 0,
    }
