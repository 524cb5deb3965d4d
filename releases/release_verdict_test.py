from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from assessments import filing
from assessments import services as run_services
from releases.models import Conversation, Release, RiskReport, RunStatus
from releases.selectors import release_verdict
from review import services as review_services

pytestmark = pytest.mark.django_db

RISKY = {
    "test_results": {"passed": 90, "failed": 12, "skipped": 0, "failing_tests": ["payments"]},
    "deployment_metrics": {"error_rate": 0.09, "response_time_p95": 400},
}


def test_never_assessed(make_release: Callable[..., Release]) -> None:
    verdict = release_verdict(make_release("v1.0.0"))
    assert verdict.state == "not_assessed"
    # No model filed: the policy's verdict counts, said as such (issue 37).
    assert (verdict.severity, verdict.source, verdict.by_policy) == ("low", "policy", True)
    assert verdict.model_severity is None
    assert verdict.as_json()["decision"] is None
    assert verdict.as_json()["source_label"] == "the policy's verdict (no model assessment)"


def test_waiting_for_a_person_counts_the_policys_high(
    make_release: Callable[..., Release],
) -> None:
    release = make_release("v2.0.0", **RISKY)
    report = filing.file_risk_report(release=release, severity="low", findings=["Error rate 9 %"])
    RiskReport.objects.filter(pk=report.pk).update(needs_review=True, review_reasons=["below"])
    verdict = release_verdict(release)
    assert (verdict.state, verdict.severity) == ("needs_person", "high")
    assert (verdict.model_severity, verdict.policy_severity) == ("low", "high")
    assert verdict.policy_version == report.policy.version
    data = verdict.as_json()
    assert data["severity"] == "high" and data["state"] == "needs_person"
    assert data["findings"][0]["text"] == "Error rate 9 %"
    assert data["review_reasons"] == ["below"]


def test_a_decision_counts_over_both(make_release: Callable[..., Release]) -> None:
    release = make_release("v2.0.0", **RISKY)
    report = filing.file_risk_report(release=release, severity="low", findings=["x"])
    RiskReport.objects.filter(pk=report.pk).update(needs_review=True)
    report.refresh_from_db()
    review_services.decide_report(
        report, None, decision="override", severity="medium", reason="known"
    )
    verdict = release_verdict(release)
    assert (verdict.state, verdict.severity, verdict.decision_kind) == (
        "decided",
        "medium",
        "override",
    )
    assert verdict.as_json()["decision"]["reason"] == "known"


def test_running_and_failed(make_release: Callable[..., Release]) -> None:
    release = make_release("v3.0.0")
    old = filing.file_risk_report(
        release=release,
        severity="medium",
        findings=["x"],
        filed_at=timezone.now() - timedelta(hours=1),
    )
    run = run_services.start_assessment(release, None)
    verdict = release_verdict(release)
    assert (verdict.state, verdict.severity, verdict.report_id) == ("running", "medium", old.pk)
    Conversation.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, error="boom")
    verdict = release_verdict(release)
    assert (verdict.state, verdict.run_error) == ("failed", "boom")


def test_assessed_as_filed(make_release: Callable[..., Release]) -> None:
    release = make_release("v4.0.0")
    filing.file_risk_report(release=release, severity="low", findings=["Nothing wrong"])
    verdict = release_verdict(release)
    assert (verdict.state, verdict.severity, verdict.model_severity) == ("assessed", "low", "low")


def test_the_suspects_sentences_are_read_back_one_a_failure() -> None:
    from releases.release_verdict import suspects_said

    detail = (
        "test_a fails in x.py line 3, a line changed by abc1234 'Fix; then more' (Ann); "
        "test_b fails; first suspect: def5678 'Tidy' changed y.py, which t.py exercises (Bo); "
        "and 4 more with suspects"
    )
    signals = [
        {"name": "failed_tests", "detail": "2 failed"},
        {"name": "failure_suspects", "detail": detail},
    ]
    assert suspects_said(signals) == (
        "test_a fails in x.py line 3, a line changed by abc1234 'Fix; then more' (Ann)",
        "test_b fails; first suspect: def5678 'Tidy' changed y.py, which t.py exercises (Bo)",
        "and 4 more with suspects",
    )
    assert suspects_said([]) == () and suspects_said(None) == ()
