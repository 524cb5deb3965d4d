from __future__ import annotations

from collections.abc import Callable

import pytest

from assessments import filing
from assessments.runner.trace_outcome import release_input, run_trace_outcome
from releases.models import (
    AssessmentOutcome,
    Conversation,
    Release,
    ReportOrigin,
    RiskReport,
    RunStatus,
)

pytestmark = pytest.mark.django_db


def test_a_run_that_succeeded_without_a_verdict_is_an_error(
    make_release: Callable[..., Release],
) -> None:
    run = Conversation.objects.create(release=make_release())
    output, error = run_trace_outcome(run.pk, RunStatus.SUCCEEDED)
    assert (output["state"], output["verdict"], error) == (
        "no report",
        None,
        "no verdict was stored",
    )


def test_a_stored_verdict_and_its_state_are_the_output(
    make_release: Callable[..., Release],
) -> None:
    release = make_release()
    run = Conversation.objects.create(release=release)
    report = filing.file_risk_report(
        release=release, severity="medium", findings=["0 failed tests"], conversation=run
    )
    output, error = run_trace_outcome(run.pk, RunStatus.SUCCEEDED)
    assert error is None
    assert output == {
        "run_status": "succeeded",
        "state": "filed",
        "verdict": {
            "report_id": report.pk,
            "severity": "medium",
            "model_severity": "medium",
            "policy_severity": "low",
            "needs_review": False,
            "origin": "model",
        },
    }


def test_a_kept_refused_filing_says_so_and_counts_as_the_higher_severity(
    make_release: Callable[..., Release],
) -> None:
    release = make_release()
    run = Conversation.objects.create(release=release)
    report = filing.file_risk_report(
        release=release,
        severity="low",
        findings=["0 failed tests"],
        conversation=run,
        origin=ReportOrigin.REFUSED_FILING,
    )
    RiskReport.objects.filter(pk=report.pk).update(needs_review=True, policy_severity="high")
    Conversation.objects.filter(pk=run.pk).update(outcome=AssessmentOutcome.KEPT_REFUSED)
    output, error = run_trace_outcome(run.pk, RunStatus.SUCCEEDED)
    assert error is None
    assert output["state"] == "Stored for review: the model did not correct its filing"
    assert (output["verdict"]["severity"], output["verdict"]["model_severity"]) == ("high", "low")
    assert output["verdict"]["origin"] == "refused_filing"


def test_a_failed_run_is_an_error_with_its_reason(make_release: Callable[..., Release]) -> None:
    run = Conversation.objects.create(release=make_release(), error="the provider said 401")
    _, error = run_trace_outcome(run.pk, RunStatus.FAILED)
    assert error == "the run failed: the provider said 401"


def test_the_release_is_the_input_only_when_content_is_captured(
    make_release: Callable[..., Release], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = Conversation.objects.create(release=make_release("v7.0.0"))
    monkeypatch.setattr("assessments.runner.trace_outcome.capture_content_default", lambda: False)
    assert release_input(run) == {"release_id": "v7.0.0"}
    monkeypatch.setattr("assessments.runner.trace_outcome.capture_content_default", lambda: True)
    assert release_input(run)["changes"] == ["Changed something"]
