from __future__ import annotations

from collections.abc import Callable

import pytest

from releases import services
from releases.models import Conversation, Release, RunStatus
from releases.runner.trace_outcome import release_input, run_trace_outcome

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
    report = services.file_risk_report(
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
            "policy_severity": "low",
            "needs_review": False,
        },
    }


def test_a_failed_run_is_an_error_with_its_reason(make_release: Callable[..., Release]) -> None:
    run = Conversation.objects.create(release=make_release(), error="the provider said 401")
    _, error = run_trace_outcome(run.pk, RunStatus.FAILED)
    assert error == "the run failed: the provider said 401"


def test_the_release_is_the_input_only_when_content_is_captured(
    make_release: Callable[..., Release], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = Conversation.objects.create(release=make_release("v7.0.0"))
    monkeypatch.setattr("releases.runner.trace_outcome.capture_content_default", lambda: False)
    assert release_input(run) == {"release_id": "v7.0.0"}
    monkeypatch.setattr("releases.runner.trace_outcome.capture_content_default", lambda: True)
    assert release_input(run)["changes"] == ["Changed something"]
