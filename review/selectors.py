"""The review desk's reads: the reports that need a person, the decisions taken."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import F, Prefetch
from django.shortcuts import get_object_or_404

from releases.models import ReviewDecision, RiskReport
from releases.selectors import awaiting_review, review_count, review_reasons, waiting_report_ids
from risk.signal_changes import changes_between

# Each waiting report renders a review box (findings, evidence, the decision form): with
# thousands waiting, 100 boxes took the desk past its 100 ms (issue 39); the page says how
# many more wait, and a decision brings the next one up.
REVIEW_QUEUE_LIMIT = 25


@dataclass(frozen=True)
class ReviewItem:
    report: RiskReport  # with its release, run and policy loaded
    previous_severity: str | None
    reasons: list[str]  # why a person should look, in words
    # The release asked again: the decision on an earlier report of it, and what moved in the
    # policy's reading since (at most a few lines, and how many more).
    earlier: ReviewDecision | None = None
    changed: tuple[str, ...] = ()
    changed_more: int = 0


@dataclass(frozen=True)
class ReviewQueue:
    items: list[ReviewItem]
    total: int


def review_queue(limit: int = REVIEW_QUEUE_LIMIT) -> ReviewQueue:
    """The review queue, reports marked for review first, then the newest: two queries."""
    queryset = awaiting_review()
    order = ("-needs_review", "-filed_at", "-id")
    # The page's reports are chosen first (an index-only order, no subquery), and only they
    # get the previous report's severity: with thousands waiting, computing it for all of
    # them before the sort was the desk's slowest statement (issue 39).
    page = RiskReport.objects.filter(pk__in=waiting_report_ids()).order_by(*order)
    # Each report is its release's latest and undecided: it counts as the release's stored
    # verdict says (releases/stored_verdict.py), read rather than computed per report.
    reports = list(
        queryset.filter(pk__in=page.values("pk")[:limit])
        .annotate(severity_shown=F("release__verdict_severity"))
        .select_related("release__service", "conversation", "policy")
        .order_by(*order)
    )
    earlier = earlier_decisions(reports)
    items = []
    for report in reports:
        decided = earlier.get(report.pk)
        changed, more = (
            changes_between(decided.report.signals or [], report.signals or [])
            if decided is not None
            else ([], 0)
        )
        items.append(
            ReviewItem(
                report,
                report.previous_severity,
                review_reasons(report, report.previous_severity),
                earlier=decided,
                changed=tuple(changed),
                changed_more=more,
            )
        )
    total = len(items) if len(items) < limit else review_count()
    return ReviewQueue(items=items, total=total)


@dataclass(frozen=True)
class LiveItem:
    """A report still open on someone's desk, as it stands now."""

    report: RiskReport  # with its decisions loaded: `counts_as` reads them
    decision: ReviewDecision | None  # the latest, if someone decided since


# A desk shows 25 items; a longer list is not a desk's.
LIVE_LIMIT = 100


def live_items(ids: list[int]) -> list[LiveItem]:
    """The reports a desk still shows open, with their latest decision: two queries."""
    reports = (
        RiskReport.objects.filter(pk__in=ids[:LIVE_LIMIT])
        .select_related("release__service", "policy")
        .prefetch_related(
            Prefetch(
                "decisions",
                queryset=ReviewDecision.objects.select_related("reviewer").order_by(
                    "created_at", "id"
                ),
            )
        )
        .order_by("pk")
    )
    items = []
    for report in reports:
        decisions = list(report.decisions.all())
        items.append(LiveItem(report, decisions[-1] if decisions else None))
    return items


def earlier_decisions(reports: list[RiskReport]) -> dict[int, ReviewDecision]:
    """For each report, the newest decision on an earlier report of its release: one query."""
    if not reports:
        return {}
    decisions = (
        ReviewDecision.objects.filter(report__release_id__in={r.release_id for r in reports})
        .exclude(report_id__in=[r.pk for r in reports])
        .select_related("report", "reviewer")
        .order_by("-created_at", "-id")
    )
    found: dict[int, ReviewDecision] = {}
    for decision in decisions:
        for report in reports:
            if (
                report.pk not in found
                and decision.report.release_id == report.release_id
                and decision.report.filed_at <= report.filed_at
            ):
                found[report.pk] = decision
    return found


def report_for_review(pk: int) -> RiskReport:
    """A report with what a decision on it needs. Raises Http404."""
    return get_object_or_404(RiskReport.objects.select_related("release__service"), pk=pk)


def decision_with_report(pk: int) -> ReviewDecision:
    """A decision with its report, release and reviewer. Raises Http404."""
    return get_object_or_404(
        ReviewDecision.objects.select_related("report__release__service", "reviewer"), pk=pk
    )


RECENT_DECISIONS_LIMIT = 50


def recent_decisions(limit: int = RECENT_DECISIONS_LIMIT) -> list[ReviewDecision]:
    """The newest decisions, with their report, release and reviewer: the desk's decided tab."""
    return list(
        ReviewDecision.objects.select_related("report__release__service", "reviewer").order_by(
            "-created_at", "-id"
        )[:limit]
    )
