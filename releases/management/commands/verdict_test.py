from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from assessments import filing
from assessments import services as run_services
from releases.models import Conversation, Release, RiskReport, RunStatus, Service
from review import services as review_services

pytestmark = pytest.mark.django_db

RISKY = {
    "test_results": {"passed": 90, "failed": 12, "skipped": 0, "failing_tests": ["test_pay"]},
    "deployment_metrics": {"error_rate": 0.09, "response_time_p95": 400},
}


def verdict(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with pytest.raises(SystemExit) as ended:
        call_command("verdict", *args, stdout=out, stderr=out)
    return int(ended.value.code or 0), out.getvalue()


def waiting_low_high(make_release: Callable[..., Release]) -> Release:
    release = make_release("v2.0.0", **RISKY)
    report = filing.file_risk_report(release=release, severity="low", findings=["Looks <b>ok</b>"])
    RiskReport.objects.filter(pk=report.pk).update(
        needs_review=True, review_reasons=["severity low is below the policy's high"]
    )
    return release


def test_below_the_bar_exits_0(make_release: Callable[..., Release]) -> None:
    release = make_release("v1.0.0")
    filing.file_risk_report(release=release, severity="low", findings=["Nothing wrong"])
    code, out = verdict("v1.0.0")
    assert code == 0 and "Low risk" in out and "Below high" in out
    # Medium is below high, and at or above medium.
    other = make_release("v1.1.0")
    filing.file_risk_report(release=other, severity="medium", findings=["1 failed test"])
    assert verdict("v1.1.0")[0] == 0
    assert verdict("v1.1.0", "--fail-on", "medium")[0] == 1


def test_at_or_above_the_bar_exits_1(make_release: Callable[..., Release]) -> None:
    release = make_release("v3.0.0", **RISKY)
    filing.file_risk_report(release=release, severity="high", findings=["Error rate 9 %"])
    code, out = verdict("v3.0.0", "--fail-on", "high")
    assert code == 1 and "High risk" in out and "At or above high" in out


def test_waiting_for_a_person_exits_2_and_counts_the_policys_high(
    make_release: Callable[..., Release], tmp_path: Path
) -> None:
    waiting_low_high(make_release)
    summary = tmp_path / "verdict.md"
    code, out = verdict("v2.0.0", "--json", "--markdown", str(summary))
    assert code == 2
    data = json.loads(out)
    assert (data["severity"], data["state"], data["exit_code"]) == ("high", "needs_person", 2)
    assert (data["model_severity"], data["policy_severity"]) == ("low", "high")
    assert data["url"].endswith("/releases/v2.0.0/")
    text = summary.read_text()
    # The CI client's summary: the headline, why, what to do, the review item linked.
    assert text.startswith(
        "### ⏸️ Detective: Default service v2.0.0: High risk · waits for a person's"
    )
    assert "**Why:** A person must decide (severity low is below the policy's high): high" in text
    review = f"/review/#queue-item-{data['report_id']}"
    assert f"**What to do:** decide on the [review page]({review})" in text
    # Model text is shown, never interpreted as HTML.
    assert r"Looks \<b\>ok\</b\>" in text and "<b>" not in text
    assert f"[Release page]({data['url']}) · [Review item]({review})" in text


def test_a_decision_settles_it(make_release: Callable[..., Release]) -> None:
    release = waiting_low_high(make_release)
    report = RiskReport.objects.get(release=release)
    review_services.decide_report(
        report, None, decision="override", severity="medium", reason="known"
    )
    assert verdict("v2.0.0")[0] == 0
    assert verdict("v2.0.0", "--fail-on", "medium")[0] == 1
    _, out = verdict("v2.0.0", "--markdown", "-")
    assert "**Why:** A person decided Medium: known" in out


def test_never_assessed_exits_by_the_policys_verdict(
    make_release: Callable[..., Release],
) -> None:
    make_release("v4.0.0", **RISKY)
    code, out = verdict("v4.0.0", "--fail-on", "high")
    assert code == 1
    assert "High risk, the policy's verdict (no model assessment) (not assessed)" in out
    assert verdict("v404.0.0")[0] == 3  # no such release


def test_a_failed_run_leaves_the_policys_verdict(
    make_release: Callable[..., Release], tmp_path: Path
) -> None:
    release = make_release("v5.0.0", **RISKY)
    run = run_services.start_assessment(release, None)
    Conversation.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, error="provider down")
    summary = tmp_path / "verdict.md"
    code, out = verdict("v5.0.0", "--json", "--markdown", str(summary))
    data = json.loads(out)
    assert (code, data["exit_code"], data["severity"], data["source"]) == (1, 1, "high", "policy")
    assert data["state"] == "failed" and data["run_error"] == "provider down"
    text = summary.read_text()
    assert "High risk, the policy's verdict (no model assessment) · at or above" in text
    assert "**The model's run failed:** provider down" in text
    assert "*(the policy's)*" not in text


def test_a_wait_that_runs_out_gives_the_policys_verdict(
    make_release: Callable[..., Release],
) -> None:
    release = make_release("v6.0.0")
    run_services.start_assessment(release, None)
    code, out = verdict("v6.0.0", "--wait", "0.3")
    assert code == 0 and "the policy's verdict (no model assessment) (being assessed)" in out


def test_a_run_after_a_report_on_the_data_now_still_has_no_verdict(
    make_release: Callable[..., Release],
) -> None:
    release = make_release("v6.1.0")
    filing.file_risk_report(release=release, severity="low", findings=["Nothing wrong"])
    run_services.start_assessment(release, None)
    code, out = verdict("v6.1.0")
    assert code == 3 and "still running" in out


def test_the_service_picks_which_release_of_that_version(
    make_release: Callable[..., Release],
) -> None:
    # The same version in two services: the default one is low, the payments one high.
    filing.file_risk_report(release=make_release("v5.0.0"), severity="low", findings=["ok"])
    payments = Service.objects.create(name="Payments", slug="payments")
    other = Release.objects.create(version="v5.0.0", service=payments, **RISKY)
    filing.file_risk_report(release=other, severity="high", findings=["Error rate 9 %"])
    assert verdict("v5.0.0")[0] == 0
    code, out = verdict("v5.0.0", "--service", "payments", "--json")
    assert code == 1
    assert json.loads(out)["url"].endswith("/services/payments/releases/v5.0.0/")
    assert verdict("v5.0.0", "--service", "Payments")[0] == 1  # by name, any case
    code, out = verdict("v5.0.0", "--service", "billing")
    assert code == 3 and "of service 'billing'" in out


@pytest.mark.parametrize("wait", ["nan", "inf", "-1", "soon"])
def test_an_absurd_wait_is_a_usage_error_of_its_own(wait: str) -> None:
    with pytest.raises(CommandError) as refused:
        call_command("verdict", "v1.0.0", "--wait", wait)
    assert refused.value.returncode == 64


def test_no_such_release_still_writes_the_summary_in_a_new_folder(tmp_path: Path) -> None:
    summary = tmp_path / "reports" / "verdict.md"
    code, _ = verdict("v9.9.9", "--markdown", str(summary))
    assert code == 3
    text = summary.read_text()
    assert "no release v9.9.9 in Detective" in text
    assert "**What to do:** send it first" in text


def test_wait_for_decision_waits_for_the_person_and_marks_the_report(
    make_release: Callable[..., Release], monkeypatch: pytest.MonkeyPatch
) -> None:
    from releases.management.commands import verdict as command

    release = waiting_low_high(make_release)
    report = RiskReport.objects.get(release=release)
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        # A person decides while the job waits: after its third ask.
        pauses.append(seconds)
        report.refresh_from_db()
        assert report.pipeline_waiting_since is not None
        if len(pauses) == 3:
            review_services.decide_report(
                report, None, decision="accept", severity="high", reason="ok"
            )

    monkeypatch.setattr(command.time, "sleep", sleep)
    code, out = verdict("v2.0.0", "--wait-for-decision", "60")
    assert code == 1
    assert out.count("Waiting for a person's decision: ") == 1
    assert f"/review/#queue-item-{report.pk}" in out
    assert pauses == [0.25, 0.5, 1.0]
    # Decided: the plain verdict says the same.
    assert verdict("v2.0.0")[0] == 1


def test_plain_wait_still_ends_on_a_report_that_waits(
    make_release: Callable[..., Release],
) -> None:
    waiting_low_high(make_release)
    assert verdict("v2.0.0", "--wait", "5")[0] == 2
    assert RiskReport.objects.get().pipeline_waiting_since is None


def test_no_such_release_still_answers_json() -> None:
    out = io.StringIO()
    with pytest.raises(SystemExit) as ended:
        call_command("verdict", "v9.9.9", "--json", stdout=out, stderr=io.StringIO())
    assert ended.value.code == 3
    answer = json.loads(out.getvalue())
    assert (answer["state"], answer["exit_code"]) == ("unavailable", 3)
    assert "no release 'v9.9.9'" in answer["problem"]


def test_the_policys_findings_the_model_left_out_are_marked_in_json_and_markdown(
    make_release: Callable[..., Release],
) -> None:
    make_release("v4.0.0", **RISKY)
    checked = filing.file_checked_report(
        release=Release.objects.get(version="v4.0.0"), severity="high", findings=["Error rate 9 %"]
    )
    assert checked.report is not None and checked.report.policy_findings
    _, out = verdict("v4.0.0", "--json")
    findings = json.loads(out)["findings"]
    assert [f["from_policy"] for f in findings] == [False] + [True] * (len(findings) - 1)
    _, text = verdict("v4.0.0", "--markdown", "-")
    assert "1. Error rate 9 %\n" in text
    for sentence in checked.report.policy_findings:
        line = next(line for line in text.splitlines() if sentence.split(":")[0] in line)
        assert line.endswith("*(the policy's)*")
