"""Reads. Every function returns querysets whose query count does not grow with the rows.

The run page's reads are in assessments/selectors.py, the review desk's in review/selectors.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, NullIf
from django.shortcuts import get_object_or_404
from django.utils import timezone

from releases import data_fingerprint, verdicts
from releases.models import (
    DEFAULT_SERVICE_SLUG,
    Conversation,
    Release,
    ReviewDecision,
    RiskReport,
    RunStatus,
    Severity,
)
from releases.release_verdict import ReleaseVerdict, verdict_of
from releases.severity import severity_that_counts, severity_that_counts_expression
from releases.trend import Trend, monday, weekly_trend

# Filter values meaning "has none": never assessed, never run.
NONE = "none"
RELEASES_PER_PAGE = 20
# The history on a release page: enough to see a trend, bounded so the page stays small.
HISTORY_LIMIT = 50
# Home: how far back a failed run still needs attention.
ATTENTION_WINDOW = timedelta(days=7)
HOME_LIST_LIMIT = 8
TREND_WEEKS = 12


def releases_with_latest_report(
    releases: QuerySet[Release] | None = None, *, search: str = ""
) -> QuerySet[Release]:
    """Releases, each with `.latest_report` (a RiskReport or None) loaded.

    Two queries in all, however many releases: one for the releases, one for the newest report
    of each (Django slices a prefetch per parent with a window function).
    """
    queryset = releases if releases is not None else Release.objects.filter(service__hidden=False)
    if search := search.strip():
        queryset = queryset.filter(Q(version__icontains=search) | Q(title__icontains=search))
    latest_first = RiskReport.objects.order_by("-filed_at", "-id")
    return queryset.prefetch_related(
        Prefetch("risk_reports", queryset=latest_first[:1], to_attr="prefetched_latest_reports")
    )


def with_severity_shown(releases: QuerySet[Release]) -> QuerySet[Release]:
    """Each release with the severity that counts, `effective_severity` (`releases/severity.py`
    over its latest report: a person's decision; else, while the report waits for review, the
    higher of the model's and the policy's; else the filed one), and `latest_severity` (the
    model's), `latest_policy_severity`, `latest_needs_review`, `latest_report_id`,
    `decision_kind`, `by_policy` (the severity is the policy's: no model filed on the data
    the release has now): read from the verdict stored on the release (`releases/stored_verdict.py`,
    written with every change), not computed per row."""
    return releases.annotate(
        effective_severity=_none_if_empty("verdict_severity"),
        latest_severity=_none_if_empty("verdict_model_severity"),
        latest_policy_severity=_none_if_empty("verdict_policy_severity"),
        latest_needs_review=F("verdict_needs_review"),
        latest_report_id=F("verdict_report_id"),
        decision_kind=_none_if_empty("verdict_decision_kind"),
        by_policy=F("verdict_by_policy"),
    )


def _none_if_empty(column: str) -> NullIf:
    return NullIf(F(column), Value(""))


def reports_with_severity_shown(reports: QuerySet[RiskReport]) -> QuerySet[RiskReport]:
    """Annotate each report with the severity it counts as, `severity_shown` (the same rule),
    and its latest decision's severity, `decided_severity`."""
    decisions = ReviewDecision.objects.filter(report_id=OuterRef("pk")).order_by(
        "-created_at", "-id"
    )
    return reports.annotate(decided_severity=Subquery(decisions.values("severity")[:1])).annotate(
        severity_shown=severity_that_counts_expression(
            filed="severity",
            policy="policy_severity",
            needs_review="needs_review",
            decided="decided_severity",
        )
    )


def with_latest_state(releases: QuerySet[Release]) -> QuerySet[Release]:
    """`with_severity_shown`, and each release's latest report time (`latest_report_at`) and
    latest run (`latest_run_id`, `latest_run_status`), from the stored verdict too."""
    return with_severity_shown(releases).annotate(
        latest_report_at=F("verdict_report_at"),
        latest_run_id=F("verdict_run_id"),
        latest_run_status=_none_if_empty("verdict_run_status"),
    )


# The release list's sortable columns; "-name" sorts descending. Releases without the figure
# come last either way.
SORT_COLUMNS = ("risk", "error_rate", "p95", "assessed")
SORTS = frozenset({*SORT_COLUMNS, *(f"-{column}" for column in SORT_COLUMNS)})


def _sort_key(column: str) -> Any:
    if column == "risk":
        return F("verdict_rank")
    if column == "error_rate":
        return Cast(KT("deployment_metrics__error_rate"), FloatField())
    if column == "p95":
        return Cast(KT("deployment_metrics__response_time_p95"), FloatField())
    return F("verdict_report_at")


@dataclass(frozen=True)
class ReleaseFilters:
    search: str = ""
    severity: str = ""  # a Severity value, NONE (never assessed), or "" for any
    run_state: str = ""  # a RunStatus value, NONE (never run), or "" for any
    sort: str = ""  # one of SORTS, or "" for the newest release first

    @property
    def active(self) -> bool:
        return bool(self.search or self.severity or self.run_state)


def filtered_releases(filters: ReleaseFilters) -> QuerySet[Release]:
    queryset = with_latest_state(
        Release.objects.select_related("service").filter(service__hidden=False)
    )
    if search := filters.search.strip():
        # `changes` is a JSON list of strings: matched as its JSON text.
        queryset = queryset.filter(
            Q(version__icontains=search) | Q(title__icontains=search) | Q(changes__icontains=search)
        )
    if filters.severity == NONE:
        queryset = queryset.filter(verdict_model_severity="")
    elif filters.severity in Severity.values:
        # What the list shows: a person's decision over the model's.
        queryset = queryset.filter(verdict_severity=filters.severity)
    if filters.run_state == NONE:
        queryset = queryset.filter(verdict_run_status="")
    elif filters.run_state in RunStatus.values:
        queryset = queryset.filter(verdict_run_status=filters.run_state)
    if filters.sort in SORTS:
        key = _sort_key(filters.sort.lstrip("-"))
        order = (
            key.desc(nulls_last=True) if filters.sort.startswith("-") else key.asc(nulls_last=True)
        )
        return queryset.order_by(order, "-created_at", "-id")
    return queryset.order_by("-created_at", "-id")


def release_page(
    filters: ReleaseFilters, page_number: Any = 1, per_page: int = RELEASES_PER_PAGE
) -> Page[Release]:
    """One page of the release list: two queries (the count, the rows with their state)."""
    return Paginator(filtered_releases(filters), per_page).get_page(page_number)


@dataclass(frozen=True)
class ReleaseDetail:
    release: Release
    reports: list[RiskReport]  # newest first, at most HISTORY_LIMIT; `.decisions` prefetched
    runs: list[Conversation]  # newest first, at most HISTORY_LIMIT
    decisions: list[ReviewDecision] = field(default_factory=list)  # newest first

    @property
    def latest_decision(self) -> ReviewDecision | None:
        """A person's latest decision on the latest report."""
        latest = self.latest_report
        if latest is None:
            return None
        decisions = list(latest.decisions.all())
        return decisions[0] if decisions else None

    @property
    def previous_severity(self) -> str | None:
        """The severity of the report before the latest one."""
        return self.reports[1].severity if len(self.reports) > 1 else None

    @property
    def review_reasons(self) -> list[str]:
        """Why the latest report needs a person (empty: it does not)."""
        latest = self.latest_report
        return review_reasons(latest, self.previous_severity) if latest else []

    @property
    def latest_report(self) -> RiskReport | None:
        return self.reports[0] if self.reports else None

    @cached_property
    def report_on_earlier_data(self) -> bool:
        """New data (a report, commits, metrics) came in after the latest report's run began:
        that report, and a person's decision on it, judged the earlier data."""
        latest = self.latest_report
        return latest is not None and not data_fingerprint.report_is_current(latest, self.release)

    @property
    def active_run(self) -> Conversation | None:
        return next((run for run in self.runs if run.is_active), None)

    @property
    def reports_oldest_first(self) -> list[RiskReport]:
        return self.reports[::-1]


def find_release(
    version: str, service: str | None = None, *, with_policy: bool = False
) -> Release | None:
    """This version of the service named by its slug or name (any case); None: the default.
    `with_policy`: the policy in force read in the same statement, for judging it
    (`verdicts.with_policy_in_force`)."""
    slug = Q(service__slug=service or DEFAULT_SERVICE_SLUG)
    wanted = slug | Q(service__name__iexact=service) if service else slug
    found = Release.objects.select_related("service").filter(wanted, version=version)
    return (verdicts.with_policy_in_force(found) if with_policy else found).first()


def release_or_404(version: str, service: str | None = None) -> Release:
    slug = service or DEFAULT_SERVICE_SLUG
    return get_object_or_404(
        Release.objects.select_related("service"), version=version, service__slug=slug
    )


def release_detail(version: str, service: str | None = None) -> ReleaseDetail:
    """A release with its report, decision and run history: five queries. Raises Http404."""
    release = release_or_404(version, service)
    reports = list(
        release.risk_reports.select_related("conversation", "policy")
        .prefetch_related(Prefetch("decisions", queryset=newest_decisions()))
        .order_by("-filed_at", "-id")[:HISTORY_LIMIT]
    )
    runs = list(release.conversations.order_by("-created_at", "-pk")[:HISTORY_LIMIT])
    decisions = list(
        newest_decisions().filter(report__release=release).select_related("report")[:HISTORY_LIMIT]
    )
    return ReleaseDetail(release=release, reports=reports, runs=runs, decisions=decisions)


def newest_decisions() -> QuerySet[ReviewDecision]:
    return ReviewDecision.objects.select_related("reviewer").order_by("-created_at", "-id")


@dataclass(frozen=True)
class Dashboard:
    recent_runs: list[Conversation]
    high_risk: list[Release]  # annotated as by with_latest_state
    failed_runs: list[Conversation]  # failed recently, not yet followed by a successful run
    counts: dict[str, int]
    trend: Trend | None = None


def severity_trend(now: datetime | None = None, weeks: int = TREND_WEEKS) -> Trend:
    """Reports per week, each at the severity that counts (`releases/severity.py`: a person's
    decision; the higher of the model's and the policy's while it waits for review; else the
    filed one). Two grouped queries: the undecided reports by week and the columns the rule
    reads, the decided ones (few) by week and their latest decision; the rule is then applied
    once a group, by `severity_that_counts`. The week is a CASE over ranges of `filed_at` (the
    database's date functions, on SQLite Python called for every row, were slow); the rule as
    a CASE per report, its decision subquery three times in it, cost 219 ms and set off
    PostgreSQL's JIT (1.5 s more) at 22,000 reports (issue 39)."""
    now = now or timezone.now()
    today = timezone.localdate(now)
    first = monday(today) - timedelta(weeks=weeks - 1)
    starts = [first + timedelta(weeks=index) for index in range(weeks + 1)]
    bounds = [timezone.make_aware(datetime.combine(day, datetime.min.time())) for day in starts]
    week = Case(
        *(When(filed_at__lt=bounds[index + 1], then=Value(index)) for index in range(weeks)),
        default=Value(None),
        output_field=IntegerField(),
    )
    in_window = RiskReport.objects.filter(filed_at__gte=bounds[0]).annotate(week=week)
    decided = Exists(ReviewDecision.objects.filter(report=OuterRef("pk")))
    latest_decision = (
        ReviewDecision.objects.filter(report=OuterRef("pk"))
        .order_by("-created_at", "-id")
        .values("severity")[:1]
    )
    undecided_groups = (
        in_window.exclude(decided)
        .values("week", "severity", "policy_severity", "needs_review")
        .annotate(count=Count("pk"))
        .order_by()
    )
    decided_groups = (
        in_window.filter(decided)
        .annotate(decided=Subquery(latest_decision))
        .values("week", "decided")
        .annotate(count=Count("pk"))
        .order_by()
    )
    rows: list[tuple[date, str, int]] = []
    for group in [*undecided_groups, *decided_groups]:
        counted = severity_that_counts(
            filed=group.get("severity"),
            policy=group.get("policy_severity"),
            needs_review=bool(group.get("needs_review")),
            decided=group.get("decided"),
        )
        if group["week"] is not None and counted in Severity.values:
            rows.append((starts[group["week"]], counted, group["count"]))
    return weekly_trend(rows, today=today, weeks=weeks)


def dashboard(now: datetime | None = None) -> Dashboard:
    """What the home page shows: nine queries, each reading an index or the releases' stored
    verdicts rather than every run (with 100,000 runs, whole-table aggregates made this the
    slowest page: benchmark 5; the verdicts computed per release, issue 39)."""
    now = now or timezone.now()
    since = now - ATTENTION_WINDOW
    # Assessments of releases: the eval trials (no release) have pages of their own.
    assessments = Conversation.objects.filter(release__isnull=False)
    recent_runs = list(
        assessments.select_related("release__service").order_by("-created_at")[:HOME_LIST_LIMIT]
    )
    later_success = Conversation.objects.filter(
        release=OuterRef("release"),
        status=RunStatus.SUCCEEDED,
        created_at__gt=OuterRef("created_at"),
    )
    failed_runs = list(
        assessments.select_related("release__service")
        .filter(status=RunStatus.FAILED, created_at__gte=since)
        .exclude(Exists(later_success))
        .order_by("-created_at")[:HOME_LIST_LIMIT]
    )
    # Counted as the release list shows them.
    release_counts = Release.objects.filter(service__hidden=False).aggregate(
        releases=Count("pk"),
        high=Count("pk", filter=Q(verdict_severity=Severity.HIGH)),
        medium=Count("pk", filter=Q(verdict_severity=Severity.MEDIUM)),
        low=Count("pk", filter=Q(verdict_severity=Severity.LOW)),
        unassessed=Count("pk", filter=Q(verdict_model_severity="")),
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
            "to_review": review_count(),
            **recent_counts,
        },
        trend=severity_trend(now),
    )


def latest_high_risk(limit: int = HOME_LIST_LIMIT) -> list[Release]:
    """The releases whose latest report counts as high (the model's, the policy's while it
    waits for a person, or a person's decision), most recently assessed first (annotated as by
    with_latest_state): read from the stored verdict. One query."""
    releases = Release.objects.select_related("service").filter(
        service__hidden=False, verdict_severity=Severity.HIGH
    )
    newest = F("verdict_report_at").desc(nulls_last=True)
    return list(with_latest_state(releases).order_by(newest, "-id")[:limit])


# ---- runs: the API's callers (the run page's reads are assessments/selectors.py) -----------


def run_for_api_token(token: str) -> Conversation | None:
    """The active run a per-run API token belongs to (None: unknown, or the run is over)."""
    from releases.services import hash_token

    if not token:
        return None
    return (
        Conversation.objects.select_related("release__service")
        .filter(api_token_hash=hash_token(token), status__in=RunStatus.active())
        .first()
    )


# ---- why a report needs a person: the run page and the review desk (review/selectors.py) ---

MISSING_FIELDS = (
    ("changes", "changes"),
    ("test_results", "test results"),
    ("deployment_metrics", "deployment metrics"),
)


def awaiting_review() -> QuerySet[RiskReport]:
    """The latest report of each release, not yet decided, that needs a person: marked for
    review when filed, a verdict that changed since the release's previous report, or a
    release with missing data (the release's stored `verdict_awaits_review`, written with
    every change: `releases/stored_verdict.py`). Annotated with `previous_severity`."""
    older = (
        RiskReport.objects.filter(release=OuterRef("release_id"))
        .filter(
            Q(filed_at__lt=OuterRef("filed_at"))
            | Q(filed_at=OuterRef("filed_at"), id__lt=OuterRef("id"))
        )
        .order_by("-filed_at", "-id")
    )
    return RiskReport.objects.filter(pk__in=waiting_report_ids()).annotate(
        previous_severity=Subquery(older.values("severity")[:1])
    )


def waiting_report_ids() -> QuerySet[Release]:
    """The ids of the reports on the review desk, as a subquery."""
    return Release.objects.filter(verdict_awaits_review=True).values("verdict_report_id")


def review_count() -> int:
    """The desk's count: the releases whose stored verdict waits for a person."""
    return Release.objects.filter(verdict_awaits_review=True).count()


def review_reasons(report: RiskReport, previous_severity: str | None) -> list[str]:
    """Why a report is in the queue, as the reviewer reads it."""
    reasons = list(report.review_reasons or []) if report.needs_review else []
    if report.needs_review and not reasons:
        reasons.append("Marked for review when it was filed.")
    if previous_severity and previous_severity != report.severity:
        reasons.append(
            f"The verdict changed: {previous_severity.capitalize()} → "
            f"{report.severity.capitalize()} since the release's previous report."
        )
    missing = [label for name, label in MISSING_FIELDS if getattr(report.release, name) is None]
    if missing:
        reasons.append(f"The release's data is incomplete: no {', no '.join(missing)}.")
    return reasons


# ---- a release's verdict: the pages, the API, the `verdict` command, the webhooks -------------


def release_verdict(release: Release) -> ReleaseVerdict:
    """The release's verdict (see `releases/release_verdict.py`): three queries."""
    return verdict_of(release)
