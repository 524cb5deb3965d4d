"""Reads. Every function returns querysets whose query count does not grow with the rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.shortcuts import get_object_or_404
from django.utils import timezone

from releases.models import (
    AgentEvent,
    Conversation,
    Message,
    Release,
    RiskReport,
    RunStatus,
    Severity,
)

# Filter values meaning "has none": never assessed, never run.
NONE = "none"
RELEASES_PER_PAGE = 20
# The history on a release page: enough to see a trend, bounded so the page stays small.
HISTORY_LIMIT = 50
# Home: how far back a failed run still needs attention.
ATTENTION_WINDOW = timedelta(days=7)
HOME_LIST_LIMIT = 8


def releases_with_latest_report(
    releases: QuerySet[Release] | None = None, *, search: str = ""
) -> QuerySet[Release]:
    """Releases, each with `.latest_report` (a RiskReport or None) loaded.

    Two queries in all, however many releases: one for the releases, one for the newest report
    of each (Django slices a prefetch per parent with a window function).
    """
    queryset = releases if releases is not None else Release.objects.all()
    if search := search.strip():
        queryset = queryset.filter(Q(version__icontains=search) | Q(title__icontains=search))
    latest_first = RiskReport.objects.order_by("-filed_at", "-id")
    return queryset.prefetch_related(
        Prefetch("risk_reports", queryset=latest_first[:1], to_attr="prefetched_latest_reports")
    )


def with_latest_state(releases: QuerySet[Release]) -> QuerySet[Release]:
    """Annotate each release with its latest report (`latest_severity`, `latest_report_at`)
    and latest run (`latest_run_id`, `latest_run_status`), as subqueries of the one query."""
    reports = RiskReport.objects.filter(release=OuterRef("pk")).order_by("-filed_at", "-id")
    runs = Conversation.objects.filter(release=OuterRef("pk")).order_by("-created_at", "-pk")
    return releases.annotate(
        latest_severity=Subquery(reports.values("severity")[:1]),
        latest_report_at=Subquery(reports.values("filed_at")[:1]),
        latest_run_id=Subquery(runs.values("pk")[:1]),
        latest_run_status=Subquery(runs.values("status")[:1]),
    )


@dataclass(frozen=True)
class ReleaseFilters:
    search: str = ""
    severity: str = ""  # a Severity value, NONE (never assessed), or "" for any
    run_state: str = ""  # a RunStatus value, NONE (never run), or "" for any

    @property
    def active(self) -> bool:
        return bool(self.search or self.severity or self.run_state)


def filtered_releases(filters: ReleaseFilters) -> QuerySet[Release]:
    queryset = with_latest_state(Release.objects.all())
    if search := filters.search.strip():
        # `changes` is a JSON list of strings: matched as its JSON text.
        queryset = queryset.filter(
            Q(version__icontains=search) | Q(title__icontains=search) | Q(changes__icontains=search)
        )
    if filters.severity == NONE:
        queryset = queryset.filter(latest_severity__isnull=True)
    elif filters.severity in Severity.values:
        queryset = queryset.filter(latest_severity=filters.severity)
    if filters.run_state == NONE:
        queryset = queryset.filter(latest_run_status__isnull=True)
    elif filters.run_state in RunStatus.values:
        queryset = queryset.filter(latest_run_status=filters.run_state)
    return queryset.order_by("-created_at", "-id")


def release_page(
    filters: ReleaseFilters, page_number: Any = 1, per_page: int = RELEASES_PER_PAGE
) -> Page[Release]:
    """One page of the release list: two queries (the count, the rows with their state)."""
    return Paginator(filtered_releases(filters), per_page).get_page(page_number)


@dataclass(frozen=True)
class ReleaseDetail:
    release: Release
    reports: list[RiskReport]  # newest first, at most HISTORY_LIMIT
    runs: list[Conversation]  # newest first, at most HISTORY_LIMIT

    @property
    def latest_report(self) -> RiskReport | None:
        return self.reports[0] if self.reports else None

    @property
    def active_run(self) -> Conversation | None:
        return next((run for run in self.runs if run.is_active), None)

    @property
    def reports_oldest_first(self) -> list[RiskReport]:
        return self.reports[::-1]


def release_detail(version: str) -> ReleaseDetail:
    """A release with its report and run history: three queries. Raises Http404."""
    release = get_object_or_404(Release, version=version)
    reports = list(
        release.risk_reports.select_related("conversation").order_by("-filed_at", "-id")[
            :HISTORY_LIMIT
        ]
    )
    runs = list(release.conversations.order_by("-created_at", "-pk")[:HISTORY_LIMIT])
    return ReleaseDetail(release=release, reports=reports, runs=runs)


@dataclass(frozen=True)
class Dashboard:
    recent_runs: list[Conversation]
    high_risk: list[Release]  # annotated as by with_latest_state
    failed_runs: list[Conversation]  # failed recently, not yet followed by a successful run
    counts: dict[str, int]


def dashboard(now: datetime | None = None) -> Dashboard:
    """What the home page shows: six queries, each reading an index rather than every run
    (with 100,000 runs, whole-table aggregates made this the slowest page: benchmark 5)."""
    now = now or timezone.now()
    since = now - ATTENTION_WINDOW
    # Assessments of releases: the eval trials (no release) have pages of their own.
    assessments = Conversation.objects.filter(release__isnull=False)
    recent_runs = list(
        assessments.select_related("release").order_by("-created_at")[:HOME_LIST_LIMIT]
    )
    later_success = Conversation.objects.filter(
        release=OuterRef("release"),
        status=RunStatus.SUCCEEDED,
        created_at__gt=OuterRef("created_at"),
    )
    failed_runs = list(
        assessments.select_related("release")
        .filter(status=RunStatus.FAILED, created_at__gte=since)
        .exclude(Exists(later_success))
        .order_by("-created_at")[:HOME_LIST_LIMIT]
    )
    latest_severities = Release.objects.annotate(
        latest_severity=Subquery(
            RiskReport.objects.filter(release=OuterRef("pk"))
            .order_by("-filed_at", "-id")
            .values("severity")[:1]
        )
    )
    release_counts = latest_severities.aggregate(
        releases=Count("pk"),
        high=Count("pk", filter=Q(latest_severity=Severity.HIGH)),
        medium=Count("pk", filter=Q(latest_severity=Severity.MEDIUM)),
        low=Count("pk", filter=Q(latest_severity=Severity.LOW)),
        unassessed=Count("pk", filter=Q(latest_severity__isnull=True)),
    )
    recent_counts = assessments.filter(created_at__gte=since).aggregate(
        runs_recently=Count("pk"),
        failed_recently=Count("pk", filter=Q(status=RunStatus.FAILED)),
    )
    return Dashboard(
        recent_runs=recent_runs,
        high_risk=latest_high_risk(),
        failed_runs=failed_runs,
        counts={
            **release_counts,
            "active": assessments.filter(status__in=RunStatus.active()).count(),
            **recent_counts,
        },
    )


def latest_high_risk(limit: int = HOME_LIST_LIMIT) -> list[Release]:
    """The releases whose latest report is high, most recently assessed first (annotated as
    by with_latest_state): found from the high reports backwards, newest first, so that only
    a few releases are looked at, not all of them. One query."""
    newer = RiskReport.objects.filter(release=OuterRef("release_id")).filter(
        Q(filed_at__gt=OuterRef("filed_at"))
        | Q(filed_at=OuterRef("filed_at"), id__gt=OuterRef("id"))
    )
    latest_high = (
        RiskReport.objects.filter(severity=Severity.HIGH)
        .exclude(Exists(newer))
        .order_by("-filed_at", "-id")
        .values("release_id")[:limit]
    )
    return list(
        with_latest_state(Release.objects.filter(pk__in=latest_high)).order_by(
            "-latest_report_at", "-id"
        )
    )


# ---- runs: the run page, the websocket's replay, the API's callers ----------------------------

VIEW_RUNS = ("releases.view_conversation", "releases.run_assessment")


def can_view_run(user: Any, run: Conversation) -> bool:
    """Staff, whoever may see or run assessments (the Release managers), and whoever started
    this run."""
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_staff or any(user.has_perm(permission) for permission in VIEW_RUNS):
        return True
    return run.triggered_by_id is not None and run.triggered_by_id == user.pk


def run_with_release(pk: Any) -> Conversation | None:
    return Conversation.objects.select_related("release", "triggered_by").filter(pk=pk).first()


def run_events(run: Conversation | Any, after: int = 0) -> list[AgentEvent]:
    """The run's saved events after sequence number `after`, in order."""
    run_id = run.pk if isinstance(run, Conversation) else run
    return list(AgentEvent.objects.filter(conversation_id=run_id, seq__gt=after).order_by("seq"))


def run_for_api_token(token: str) -> Conversation | None:
    """The active run a per-run API token belongs to (None: unknown, or the run is over)."""
    from releases.services import hash_token

    if not token:
        return None
    return (
        Conversation.objects.select_related("release")
        .filter(api_token_hash=hash_token(token), status__in=RunStatus.active())
        .first()
    )


def run_messages(run: Conversation) -> list[Message]:
    """The run's transcript: its messages in order."""
    return list(run.messages.order_by("position"))
