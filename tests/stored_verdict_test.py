"""Issue 39: the verdict stored on a release agrees with the one computed, after every path
that writes something the verdict reads (a run queued, claimed, ended, failed, cancelled; a
report filed; a person's decision; release data; a policy version; deletions)."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from assessments import services as runs
from assessments.filing import file_risk_report
from releases import services as release_services
from releases import stored_verdict
from releases.models import Conversation, Release, RiskReport, RunStatus
from releases.selectors import (
    ReleaseFilters,
    awaiting_review,
    dashboard,
    filtered_releases,
    release_verdict,
    review_count,
)
from releases.stored_verdict import STORED_FIELDS, computed_values, refresh_all
from review.services import decide_report
from risk.settings import PolicySettings
from sources.services import Origin, ReleaseFields, ingest_junit, upsert_release

pytestmark = pytest.mark.django_db(transaction=False)

DATA: dict[str, Any] = {
    "changes": ["Added payment processing"],
    "test_results": {"passed": 10, "failed": 0, "skipped": 0},
    "deployment_metrics": {"error_rate": 0.001, "response_time_p95": 200},
}


def stored(release: Release) -> dict[str, Any]:
    return Release.objects.filter(pk=release.pk).values(*STORED_FIELDS).get()


def assert_agrees(release: Release, walked: list[str], step: str) -> dict[str, Any]:
    fresh = Release.objects.get(pk=release.pk)
    expected = computed_values(fresh)
    assert stored(fresh) == expected, f"after {step}"
    # The lists store the gate's verdict: the policy's where no model filed on the data now.
    gate = release_verdict(fresh)
    assert (stored(fresh)["verdict_severity"] or None) == gate.severity
    assert stored(fresh)["verdict_by_policy"] == gate.by_policy
    assert stored(fresh)["verdict_state"] == str(release_verdict(fresh).state)
    walked.append(step)
    return expected


def test_every_writing_path_leaves_the_stored_verdict_equal_to_the_computed_one() -> None:
    user = get_user_model().objects.create_user("reviewer")
    walked: list[str] = []
    release = release_services.create_release(version="v1.0.0", title="Checkout", **DATA)
    assert assert_agrees(release, walked, "a new release")["verdict_state"] == "not_assessed"

    run = runs.start_assessment(release, user)
    assert assert_agrees(release, walked, "a run queued")["verdict_state"] == "running"
    runs.mark_running(run.pk)
    assert_agrees(release, walked, "a run claimed")
    report = file_risk_report(
        release=release, severity="low", findings=["Nothing risky."], conversation=run
    )
    assert_agrees(release, walked, "a report filed")
    runs.finish_run(run.pk, status=RunStatus.SUCCEEDED, outcome="filed")
    first = assert_agrees(release, walked, "a run ended")
    assert first["verdict_state"] in ("assessed", "needs_person")

    failing = runs.start_assessment(release, user)
    runs.mark_running(failing.pk)
    runs.finish_run(failing.pk, status=RunStatus.FAILED, error="boom")
    assert assert_agrees(release, walked, "a run failed")["verdict_state"] == "failed"

    queued = runs.start_assessment(release, user)
    runs.cancel_assessment(queued)
    assert assert_agrees(release, walked, "a queued run cancelled")["verdict_run_status"] == (
        "cancelled"
    )

    stale = runs.start_assessment(release, user)
    runs.mark_running(stale.pk)
    Conversation.objects.filter(pk=stale.pk).update(
        heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    assert [r.pk for r in runs.fail_stale_runs()] == [stale.pk]
    assert assert_agrees(release, walked, "a stale run failed by the sweep")["verdict_run_status"]

    # A higher report from the policy's view, filed later: the verdict changed since the
    # previous report, so the release goes on the desk.
    second = file_risk_report(release=release, severity="high", findings=["Error rate up."])
    on_desk = assert_agrees(release, walked, "a second report filed")
    assert on_desk["verdict_awaits_review"] is True
    assert review_count() == 1 and list(awaiting_review()) == [second]

    decide_report(second, user, decision="override", severity="medium", reason="Known noise.")
    decided = assert_agrees(release, walked, "a decision")
    assert (decided["verdict_severity"], decided["verdict_state"]) == ("medium", "decided")
    assert decided["verdict_awaits_review"] is False

    release.deployment_metrics = None
    release.save()
    assert_agrees(release, walked, "release data changed")

    release_services.new_policy_version(PolicySettings(), note="stricter")
    assert_agrees(release, walked, "a new policy version")

    second.decisions.all().delete()
    assert assert_agrees(release, walked, "a decision deleted")["verdict_awaits_review"] is True
    second.delete()
    assert assert_agrees(release, walked, "a report deleted")["verdict_report_id"] == report.pk
    Conversation.objects.filter(pk=stale.pk).delete()
    assert_agrees(release, walked, "a run deleted")
    assert len(walked) == 15


def test_the_lists_read_the_stored_verdict() -> None:
    user = get_user_model().objects.create_user("reviewer")
    high = release_services.create_release(version="v2.0.0", **DATA)
    low = release_services.create_release(version="v2.0.1", **DATA)
    never = release_services.create_release(version="v2.0.2", **DATA)
    file_risk_report(release=high, severity="high", findings=["Error rate up."])
    report = file_risk_report(release=low, severity="high", findings=["Looks risky."])
    decide_report(report, user, decision="override", severity="low", reason="Known noise.")

    # Never assessed by a model: the policy's verdict, as the gate and the release page say
    # (a payment change without a model's report is medium), not "Not assessed".
    gate = release_verdict(never)
    assert (gate.severity, gate.by_policy) == ("medium", True)
    listed = {r.version: r for r in filtered_releases(ReleaseFilters(sort="-risk"))}
    assert list(listed) == [high.version, never.version, low.version]
    assert (listed[never.version].effective_severity, listed[never.version].by_policy) == (
        "medium",
        True,
    )
    assert not listed[high.version].by_policy and not listed[low.version].by_policy
    highs = filtered_releases(ReleaseFilters(severity="high"))
    assert [r.version for r in highs] == [high.version]
    counts = dashboard().counts
    # "Not assessed" counts the releases no model assessed; their severity is the policy's.
    assert (counts["high"], counts["medium"], counts["low"], counts["unassessed"]) == (1, 1, 1, 1)
    assert [r.version for r in dashboard().high_risk] == [high.version]


def test_refresh_all_writes_what_the_one_release_refresh_writes() -> None:
    """The batched refresh (a window function per batch) and the one-release refresh
    (`verdict_of`) agree, over releases in every state."""
    user = get_user_model().objects.create_user("reviewer")
    never = release_services.create_release(version="v3.0.0", **DATA)
    one = release_services.create_release(version="v3.0.1", **DATA)
    file_risk_report(release=one, severity="medium", findings=["Some risk."])
    changed = release_services.create_release(version="v3.0.2", **DATA)
    file_risk_report(release=changed, severity="low", findings=["Fine."])
    decided = file_risk_report(release=changed, severity="high", findings=["Error rate up."])
    decide_report(decided, user, decision="override", severity="medium", reason="Known.")
    missing = release_services.create_release(version="v3.0.3", changes=["x"])
    file_risk_report(release=missing, severity="low", findings=["Fine."])
    running = release_services.create_release(version="v3.0.4", **DATA)
    file_risk_report(release=running, severity="high", findings=["Error rate up."])
    runs.start_assessment(running, user)
    releases = [never, one, changed, missing, running]
    expected = [stored(release) for release in releases]
    assert {row["verdict_state"] for row in expected} == {
        "not_assessed",
        "assessed",
        "decided",
        "running",
    }
    assert [row["verdict_awaits_review"] for row in expected] == [False, False, False, True, False]
    Release.objects.update(verdict_state="", verdict_severity="", verdict_awaits_review=False)
    assert refresh_all(Release.objects.filter(verdict_state="")) == 5
    assert [stored(release) for release in releases] == expected
    assert RiskReport.objects.filter(release=one).count() == 1


def test_a_write_that_skips_the_refresh_is_caught_by_the_comparison() -> None:
    """The comparison above can fail: a report changed behind the services' back (a bare
    UPDATE) leaves the stored verdict behind the computed one."""
    release = release_services.create_release(version="v4.0.0", **DATA)
    report = file_risk_report(release=release, severity="low", findings=["Fine."])
    RiskReport.objects.filter(pk=report.pk).update(severity="high", needs_review=False)
    assert stored(release)["verdict_severity"] == "low"
    assert computed_values(Release.objects.get(pk=release.pk))["verdict_severity"] == "high"


def test_a_write_of_several_rows_refreshes_the_stored_verdict_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`upsert_release` saves a new release twice (made, then its fields) and an ingestion
    writes its row and the release's figures: the verdict (the policy's judgement, 17-270 ms
    at a team's size) is computed once a call, after the last write."""
    computed: list[int] = []
    real = stored_verdict.computed_values

    def counted(release: Release) -> dict[str, Any]:
        computed.append(release.pk)
        return real(release)

    monkeypatch.setattr(stored_verdict, "computed_values", counted)
    origin = Origin("test")
    made, created = upsert_release(ReleaseFields(version="v5.0.0", title="New"), origin)
    assert created and computed == [made.pk]
    upsert_release(ReleaseFields(version="v5.0.0", title="Renamed"), origin)
    assert computed == [made.pk] * 2
    xml = b'<testsuite name="s"><testcase classname="c" name="t"><failure/></testcase></testsuite>'
    ingest_junit(made, io.BytesIO(xml), "report.xml", origin)
    assert computed == [made.pk] * 3
    # After the last write: the failing test is in the stored (policy's) verdict.
    fresh = Release.objects.get(pk=made.pk)
    assert stored(fresh) == real(fresh)
    assert fresh.test_results is not None and fresh.test_results["failed"] == 1


def test_a_report_on_earlier_data_gives_way_to_the_policy_in_the_lists() -> None:
    """New data after a model's report: the gate goes by the policy's verdict on the data
    now, and so does the stored verdict the lists read."""
    origin = Origin("test")
    release, _ = upsert_release(ReleaseFields(version="v6.0.0"), origin)
    run = runs.start_assessment(release, None)
    runs.mark_running(run.pk)
    file_risk_report(release=release, severity="low", findings=["Fine."], conversation=run)
    runs.finish_run(run.pk, status=RunStatus.SUCCEEDED, outcome="filed")
    assert stored(release)["verdict_by_policy"] is False
    xml = b'<testsuite name="s"><testcase classname="c" name="t"><failure/></testcase></testsuite>'
    ingest_junit(release, io.BytesIO(xml), "late.xml", origin)
    fresh = Release.objects.get(pk=release.pk)
    gate = release_verdict(fresh)
    assert gate.by_policy and gate.severity != "low"
    assert (stored(fresh)["verdict_severity"], stored(fresh)["verdict_by_policy"]) == (
        gate.severity,
        True,
    )
