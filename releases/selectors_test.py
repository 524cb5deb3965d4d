from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from assessments import filing
from releases.models import Conversation, Release, RiskReport, RunStatus
from releases.selectors import (
    ReleaseFilters,
    dashboard,
    filtered_releases,
    latest_high_risk,
    release_detail,
    release_page,
    releases_with_latest_report,
    with_latest_state,
)
from review import services as review_services

pytestmark = pytest.mark.django_db


def make_releases_with_reports(make_release: Callable[..., Release], count: int) -> None:
    now = timezone.now()
    for index in range(count):
        release = make_release(f"v{index}")
        for age, severity in enumerate(["low", "medium", "high"][: index % 4]):
            RiskReport.objects.create(
                release=release, severity=severity, filed_at=now - timedelta(hours=age)
            )


@pytest.mark.parametrize("count", [3, 30])
def test_latest_reports_take_two_queries_however_many_releases(
    make_release: Callable[..., Release], django_assert_num_queries: Any, count: int
) -> None:
    make_releases_with_reports(make_release, count)
    with django_assert_num_queries(2):
        rows = [
            (release.version, release.latest_report and release.latest_report.severity)
            for release in releases_with_latest_report()
        ]
    assert len(rows) == count
    # Index % 4 == 0 has no report; otherwise the newest report is always "low" (age 0).
    assert {severity for version, severity in rows} == {None, "low"}


def test_latest_report_is_the_newest_and_ties_go_to_the_last_filed(
    make_release: Callable[..., Release],
) -> None:
    release = make_release()
    now = timezone.now()
    RiskReport.objects.create(release=release, severity="low", filed_at=now - timedelta(days=1))
    RiskReport.objects.create(release=release, severity="high", filed_at=now)
    tie = RiskReport.objects.create(release=release, severity="medium", filed_at=now)
    RiskReport.objects.create(release=release, severity="low", filed_at=now - timedelta(days=3))
    make_release("unassessed")

    latest = {r.version: r.latest_report for r in releases_with_latest_report()}
    assert latest[release.version] == tie
    assert latest["unassessed"] is None


def test_search_matches_version_or_title(make_release: Callable[..., Release]) -> None:
    make_release("v2.1.0", title="Payment processing")
    make_release("v2.2.0", title="Saved cards")
    make_release("v3.0.0-rc1", title="Subscriptions")

    def versions(search: str) -> list[str]:
        return sorted(r.version for r in releases_with_latest_report(search=search))

    assert versions("payment") == ["v2.1.0"]
    assert versions("RC1") == ["v3.0.0-rc1"]
    assert versions("  ") == ["v2.1.0", "v2.2.0", "v3.0.0-rc1"]


def test_accepts_a_narrowed_queryset(make_release: Callable[..., Release]) -> None:
    make_release("keep")
    make_release("drop")
    narrowed = Release.objects.filter(version="keep")
    assert [r.version for r in releases_with_latest_report(narrowed)] == ["keep"]


# --- the release list, the detail page and home ---------------------------------------------


def add_history(make_release: Callable[..., Release], count: int) -> None:
    """Releases with reports and runs of every kind."""
    statuses = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.RUNNING]
    for index in range(count):
        release = make_release()
        for severity in ["low", "high"][: index % 3]:
            filing.file_risk_report(release=release, severity=severity, findings=["x"])
        for status in statuses[: index % 5]:
            Conversation.objects.create(release=release, status=status, error="e")


@pytest.mark.parametrize("count", [3, 40])
def test_a_page_of_releases_takes_two_queries_however_many_rows(
    make_release: Callable[..., Release], django_assert_num_queries: Any, count: int
) -> None:
    add_history(make_release, count)
    with django_assert_num_queries(2):  # the count, the rows with their latest state
        page = release_page(ReleaseFilters(), 1, per_page=50)
        states = [(r.latest_severity, r.latest_run_status, r.latest_run_id) for r in page]
    assert len(states) == count
    with django_assert_num_queries(2):
        filtered = release_page(ReleaseFilters(search="v1", severity="high", run_state="failed"))
        assert all(r.latest_severity == "high" for r in filtered)


def test_latest_state_is_the_newest_report_and_run(make_release: Callable[..., Release]) -> None:
    release = make_release("v1")
    now = timezone.now()
    filing.file_risk_report(release=release, severity="high", findings=["x"], filed_at=now)
    filing.file_risk_report(
        release=release, severity="low", findings=["x"], filed_at=now - timedelta(days=1)
    )
    Conversation.objects.create(release=release, status=RunStatus.FAILED, created_at=now)
    Conversation.objects.create(
        release=release, status=RunStatus.SUCCEEDED, created_at=now - timedelta(hours=1)
    )
    make_release("v2")
    rows = {r.version: r for r in with_latest_state(Release.objects.all())}
    assert (rows["v1"].latest_severity, rows["v1"].latest_report_at) == ("high", now)
    assert rows["v1"].latest_run_status == RunStatus.FAILED
    assert rows["v2"].latest_severity is None and rows["v2"].latest_run_id is None


def test_filters(make_release: Callable[..., Release]) -> None:
    a = make_release("v1.0.0", title="Payments", changes=["Added refunds"])
    b = make_release("v2.0.0", title="Search", changes=None)
    make_release("v3.0.0", title="Copy")
    filing.file_risk_report(release=a, severity="high", findings=["x"])
    filing.file_risk_report(release=b, severity="low", findings=["x"])
    Conversation.objects.create(release=b, status=RunStatus.QUEUED)

    def versions(**filters: str) -> list[str]:
        return sorted(r.version for r in filtered_releases(ReleaseFilters(**filters)))

    assert versions(search="REFUND") == ["v1.0.0"]  # a change, any case
    assert versions(search="search") == ["v2.0.0"]
    assert versions(search="v3") == ["v3.0.0"]
    assert versions(severity="high") == ["v1.0.0"]
    assert versions(severity="none") == ["v3.0.0"]
    assert versions(run_state="queued") == ["v2.0.0"]
    assert versions(run_state="none") == ["v1.0.0", "v3.0.0"]
    # Never assessed by a model, v3.0.0 counts at the policy's verdict on its data (issue 39).
    assert versions(severity="low", run_state="none") == ["v3.0.0"]
    assert not ReleaseFilters().active and ReleaseFilters(severity="low").active


def test_release_detail_takes_five_queries(
    make_release: Callable[..., Release], django_assert_num_queries: Any
) -> None:
    release = make_release("v1")
    now = timezone.now()
    for age in range(5):
        run = Conversation.objects.create(
            release=release, status=RunStatus.SUCCEEDED, created_at=now - timedelta(hours=age)
        )
        filing.file_risk_report(
            release=release,
            severity="low",
            findings=["x"],
            conversation=run,
            filed_at=now - timedelta(hours=age),
        )
    active = Conversation.objects.create(release=release, status=RunStatus.RUNNING)
    # The release, its reports, their decisions, its runs, the decision history.
    with django_assert_num_queries(5):
        detail = release_detail("v1")
        assert detail.latest_report is not None and detail.latest_report.conversation is not None
        assert detail.latest_decision is None and detail.previous_severity == "low"
        assert [r.filed_at for r in detail.reports_oldest_first] == sorted(
            r.filed_at for r in detail.reports
        )
    assert detail.active_run == active
    assert len(detail.runs) == 6


def test_dashboard(make_release: Callable[..., Release], django_assert_num_queries: Any) -> None:
    now = timezone.now()
    high = make_release("high")
    filing.file_risk_report(release=high, severity="high", findings=["x"])
    was_high = make_release("was-high")
    filing.file_risk_report(
        release=was_high, severity="high", findings=["x"], filed_at=now - timedelta(days=1)
    )
    filing.file_risk_report(release=was_high, severity="low", findings=["x"], filed_at=now)
    make_release("unassessed")
    # A failure followed by a success no longer needs attention; an old one neither.
    fixed = Conversation.objects.create(
        release=was_high, status=RunStatus.FAILED, created_at=now - timedelta(hours=2)
    )
    Conversation.objects.create(
        release=was_high, status=RunStatus.SUCCEEDED, created_at=now - timedelta(hours=1)
    )
    open_failure = Conversation.objects.create(
        release=high, status=RunStatus.FAILED, error="Rate limited", created_at=now
    )
    Conversation.objects.create(
        release=high, status=RunStatus.FAILED, created_at=now - timedelta(days=30)
    )
    Conversation.objects.create(release=was_high, status=RunStatus.RUNNING)
    # An eval trial (no release) is not an assessment: the home page leaves it out.
    Conversation.objects.create(release=None, status=RunStatus.FAILED, created_at=now)

    # Nine: the trend reads the undecided and the decided reports apart (issue 39).
    with django_assert_num_queries(9):
        board = dashboard()
        assert [r.version for r in board.high_risk] == ["high"]
        assert board.failed_runs == [open_failure]
        assert fixed not in board.failed_runs
        assert board.recent_runs[0].release is not None  # loaded with its run
    assert len(board.recent_runs) == 5
    assert board.counts == {
        "releases": 3,
        "high": 1,
        "medium": 0,
        "low": 2,  # was-high, and "unassessed" at the policy's verdict (issue 39)
        "unassessed": 1,
        "active": 1,
        "failed_recently": 2,
        "runs_recently": 4,
        "to_review": 1,  # was-high went from high to low
    }
    assert board.trend is not None and board.trend.total == 3
    # A person's override moves the release to the severity they decided.
    review_services.decide_report(
        RiskReport.objects.filter(release=high).get(),
        None,
        decision="override",
        severity="medium",
        reason="x",
    )
    counts = dashboard().counts
    assert (counts["high"], counts["medium"], counts["low"]) == (0, 1, 2)


def test_latest_high_risk_is_newest_first_limited_and_reads_only_the_latest_report(
    make_release: Callable[..., Release],
) -> None:
    now = timezone.now()
    for n in range(5):
        release = make_release(f"h{n}")
        filing.file_risk_report(
            release=release, severity="high", findings=["x"], filed_at=now - timedelta(hours=n)
        )
    # Two reports at the same instant: the later one (higher id) is the latest.
    tie = make_release("tie")
    filing.file_risk_report(release=tie, severity="low", findings=["x"], filed_at=now)
    filing.file_risk_report(release=tie, severity="high", findings=["x"], filed_at=now)
    untied = make_release("untied")
    filing.file_risk_report(release=untied, severity="high", findings=["x"], filed_at=now)
    filing.file_risk_report(release=untied, severity="low", findings=["x"], filed_at=now)

    high = latest_high_risk(limit=3)
    assert [r.version for r in high] == ["tie", "h0", "h1"]
    assert all(r.latest_severity == "high" for r in high)
    assert len(latest_high_risk(limit=50)) == 6


# ---- review queue -----------------------------------------------------------------------------


def test_the_review_queue_holds_the_latest_undecided_reports_that_need_a_person(
    make_release: Callable[..., Release], django_assert_num_queries: Any
) -> None:
    from releases.selectors import review_count
    from review.selectors import review_queue

    now = timezone.now()

    def report(release: Release, severity: str, hours_ago: int, **fields: Any) -> RiskReport:
        return RiskReport.objects.create(
            release=release, severity=severity, filed_at=now - timedelta(hours=hours_ago), **fields
        )

    flagged = report(make_release("flagged"), "low", 1, needs_review=True, review_reasons=["X"])
    changed_release = make_release("changed")
    report(changed_release, "medium", 5)
    changed = report(changed_release, "high", 2)
    same_release = make_release("same")
    report(same_release, "low", 5)
    report(same_release, "low", 2)  # unchanged, data complete, not flagged: no review
    missing = report(make_release("missing", test_results=None), "medium", 3)
    superseded_release = make_release("superseded")
    report(superseded_release, "high", 9, needs_review=True)  # a newer report replaced it
    report(superseded_release, "high", 8)
    decided = report(make_release("decided"), "high", 1, needs_review=True)
    review_services.decide_report(decided, None, decision="accept")

    with django_assert_num_queries(2):  # the page's reports, the earlier decisions on them
        queue = review_queue()
    assert [item.report for item in queue.items] == [flagged, changed, missing]
    assert queue.total == 3 == review_count()
    reasons = {item.report.release.version: item.reasons for item in queue.items}
    assert reasons["flagged"] == ["X"]
    assert reasons["changed"] == [
        "The verdict changed: Medium → High since the release's previous report."
    ]
    assert reasons["missing"] == ["The release's data is incomplete: no test results."]


def test_the_release_list_shows_a_persons_decision_over_the_models(
    make_release: Callable[..., Release],
) -> None:
    overridden = make_release("overridden")
    report = RiskReport.objects.create(release=overridden, severity="low")
    review_services.decide_report(
        report, None, decision="override", severity="high", reason="Refunds."
    )
    RiskReport.objects.create(release=make_release("model-only"), severity="low")

    rows = {r.version: r for r in with_latest_state(Release.objects.all())}
    assert (rows["overridden"].effective_severity, rows["overridden"].decision_kind) == (
        "high",
        "override",
    )
    assert rows["overridden"].latest_severity == "low"
    assert (rows["model-only"].effective_severity, rows["model-only"].decision_kind) == (
        "low",
        None,
    )
    high = filtered_releases(ReleaseFilters(severity="high"))
    assert [r.version for r in high] == ["overridden"]


def test_a_report_waiting_for_review_never_shows_lower_than_the_policy(
    make_release: Callable[..., Release],
) -> None:
    waiting = RiskReport.objects.create(
        release=make_release("waiting"), severity="low", policy_severity="high", needs_review=True
    )
    RiskReport.objects.create(
        release=make_release("above"), severity="high", policy_severity="medium"
    )

    rows = {r.version: r for r in with_latest_state(Release.objects.all())}
    assert (rows["waiting"].effective_severity, rows["waiting"].latest_needs_review) == (
        "high",
        True,
    )
    assert rows["above"].effective_severity == "high"  # the model saw more risk: it stands
    assert [r.version for r in filtered_releases(ReleaseFilters(severity="low"))] == []
    assert dashboard().counts["high"] == 2
    assert {r.version for r in latest_high_risk()} == {"waiting", "above"}

    # A person who accepts the model's low is what the list shows from then on.
    review_services.decide_report(waiting, None, decision="accept")
    rows = {r.version: r for r in with_latest_state(Release.objects.all())}
    assert (rows["waiting"].effective_severity, rows["waiting"].decision_kind) == ("low", "accept")


def test_the_severity_trend_counts_reports_per_week_a_decision_over_the_model(
    make_release: Callable[..., Release], django_assert_num_queries: Any
) -> None:
    from releases.selectors import severity_trend

    now = timezone.now()
    release = make_release()
    for severity in ("high", "low"):
        RiskReport.objects.create(release=release, severity=severity, filed_at=now)
    overridden = RiskReport.objects.create(release=release, severity="low", filed_at=now)
    review_services.decide_report(
        overridden, None, decision="override", severity="medium", reason="x"
    )
    RiskReport.objects.create(release=release, severity="high", filed_at=now - timedelta(weeks=1))
    RiskReport.objects.create(release=release, severity="high", filed_at=now - timedelta(weeks=20))
    # Waiting for review, the policy's high counts over the model's low.
    RiskReport.objects.create(
        release=release, severity="low", policy_severity="high", needs_review=True, filed_at=now
    )

    with django_assert_num_queries(2):
        trend = severity_trend(now)
    assert trend.bars[-1].counts == {"high": 2, "medium": 1, "low": 1}
    assert trend.bars[-2].counts == {"high": 1, "medium": 0, "low": 0}
    assert trend.total == 5  # the report of 20 weeks ago is outside the window
