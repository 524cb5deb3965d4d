"""Filing a run's report: validated, checked against the policy and the data, and what the
policy's evidence adds to the model's findings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from assessments import filing
from assessments import services as run_services
from releases import release_verdict
from releases.models import Conversation, Release, RiskReport
from sources import judging

pytestmark = pytest.mark.django_db


def test_file_risk_report_validates_severity_and_findings(
    make_release: Callable[..., Release],
) -> None:
    release = make_release()
    report = filing.file_risk_report(
        release=release, severity="medium", findings=["One flaky test"], summary="ok"
    )
    assert report.findings == ["One flaky test"]
    with pytest.raises(ValidationError):
        filing.file_risk_report(release=release, severity="critical", findings=[])
    with pytest.raises(ValidationError):
        filing.file_risk_report(release=release, severity="low", findings=[""])
    assert RiskReport.objects.count() == 1


@pytest.mark.parametrize(("read", "refused"), [(True, True), (False, False)])
def test_a_report_saying_the_summary_could_not_be_read_is_checked_against_the_run(
    make_release: Callable[..., Release], read: bool, refused: bool
) -> None:
    release = make_release()
    run = Conversation.objects.create(release=release)
    metadata: dict[str, Any] = {"tool_name": "get_release_summary"}
    if not read:
        metadata["is_error"] = True
    run_services.append_message(
        run, role="tool", tool_call_id="c1", content="{}", metadata=metadata
    )
    checked = filing.file_checked_report(
        release=release,
        severity="low",
        findings=["The release summary could not be read"],
        conversation=run,
    )
    problems = " ".join(checked.decision.problems)
    assert ("the run read the release summary" in problems) is refused


def test_a_report_that_says_less_than_the_policy_keeps_the_rest_marked_as_the_policys(
    make_release: Callable[..., Release], admin_client: Any
) -> None:
    release = make_release(
        "v3.0.0",
        changes=["Refactor payment capture"],
        test_results={
            "passed": 90,
            "failed": 2,
            "skipped": 0,
            "failing_tests": ["test_refund_reuse", "test_<b>capture</b>_retry"],
        },
        deployment_metrics={"error_rate": 0.07, "response_time_p95": 300},
    )
    evidence = judging.judge_release(release).verdict.evidence()
    error_rate = next(s for s in evidence if s.startswith("Error rate"))
    checked = filing.file_checked_report(
        release=release, severity="high", findings=["The error rate is 7 %, too high."]
    )
    report = checked.report
    assert report is not None
    # The model's words first, then every sentence of the policy it left out, as the policy's.
    assert report.model_findings == ["The error rate is 7 %, too high."]
    assert report.policy_findings == [s for s in evidence if s != error_rate]
    assert report.findings == [*report.model_findings, *report.policy_findings]
    flagged = [p["text"] for p in report.grounding if p.get("from_policy")]
    assert flagged == report.policy_findings
    assert [p["where"] for p in report.grounding] == [
        f"finding {n}" for n in range(1, len(report.findings) + 1)
    ]

    verdict = release_verdict.verdict_of(release).as_json()
    assert [f["from_policy"] for f in verdict["findings"]] == [False] + [True] * len(
        report.policy_findings
    )

    page = admin_client.get(f"/releases/{release.version}/").content.decode()
    assert page.count('<span class="rv-flag rv-flag-policy"') == len(report.policy_findings)
    assert "test_&lt;b&gt;capture&lt;/b&gt;_retry" in page
    assert "<b>capture</b>" not in page


def test_a_report_that_carries_the_policys_evidence_gets_nothing_added(
    make_release: Callable[..., Release],
) -> None:
    release = make_release("v3.0.1")
    evidence = judging.judge_release(release).verdict.evidence()
    checked = filing.file_checked_report(release=release, severity="low", findings=evidence)
    assert checked.report is not None
    assert checked.report.policy_findings == []
    assert checked.report.findings == evidence
