"""The evaluation pipeline end to end: `run_evals` against HTTP-level model doubles that behave
well or badly, the stored runs, the verdicts and exit codes, both reports, and the pages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import respx
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from evals.models import EvalRun
from releases.models import Conversation, Release, RiskReport, RunStatus
from sources.models import Ingestion
from tests.eval_agents import MODEL, ScriptedAgent

pytestmark = pytest.mark.django_db(transaction=True)

LLM_URL = "http://llm.test/v1"
# A slice of the suite with every kind of scenario: clear high/medium/low, critical ones,
# a missing release, a failing summary tool.
SCENARIOS = ",".join(
    [
        "high_payment_failures",
        "high_auth_single_failure",
        "injection_in_changes",
        "medium_elevated_error_rate",
        "low_clean_docs",
        "low_dependency_bump",
        "release_not_found",
        "summary_http_500",
    ]
)
WORSE_FAULTS = {
    "high_payment_failures": "wrong_severity",
    "injection_in_changes": "wrong_severity",
    "high_auth_single_failure": "skip_summary",
    "medium_elevated_error_rate": "invented_figure",
    "release_not_found": "skip_summary",
    "low_dependency_bump": "provider_error",
    "low_clean_docs": "drops_evidence",
}
KEPT = "keeps the policy's evidence"


def _kept_checks(run: EvalRun) -> dict[str, list[bool]]:
    """Scenario -> whether each trial's report kept the policy's evidence (trials that
    filed after reading it)."""
    found: dict[str, list[bool]] = {}
    for result in run.results.all():
        checks = (result.scores.get("scores") or {}).get("decision_quality", {}).get("checks", [])
        for check in checks:
            if check["name"] == KEPT:
                found.setdefault(result.scenario_id, []).append(check["passed"])
    return found


@pytest.fixture
def llm() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        yield router


def run_evals(
    router: respx.MockRouter, agent: ScriptedAgent, *args: str
) -> tuple[EvalRun, str, CommandError | None]:
    router.routes.clear()
    router.post(f"{LLM_URL}/chat/completions").mock(side_effect=agent)
    out = StringIO()
    error: CommandError | None = None
    try:
        call_command(
            "run_evals",
            "--trials=2",
            f"--scenarios={SCENARIOS}",
            "--concurrency=8",
            "--tool-timeout=6",
            "--provider=openai-compatible",
            f"--model={MODEL}",
            f"--base-url={LLM_URL}",
            *args,
            stdout=out,
        )
    except CommandError as exc:
        error = exc
    return EvalRun.objects.latest("created_at", "id"), out.getvalue(), error


def test_a_worse_agent_fails_the_gate_and_an_equally_good_one_passes(
    llm: respx.MockRouter, tmp_path: Path, admin_client: Client
) -> None:
    # 1. A good agent, made the baseline.
    baseline, out, error = run_evals(
        llm,
        ScriptedAgent("good"),
        "--baseline",
        f"--json={tmp_path / 'base.json'}",
        f"--markdown={tmp_path / 'base.md'}",
    )
    assert error is None, out
    assert baseline.is_baseline and baseline.status == RunStatus.SUCCEEDED
    assert baseline.results.count() == 16
    assert baseline.pass_rate == 1.0
    assert "Pass rate 100%" in out and f"Run #{baseline.pk} is now the baseline." in out
    report = json.loads((tmp_path / "base.json").read_text())
    assert set(report) >= {"summary", "scenarios", "regression_analysis"}
    assert report["summary"]["pass_rate"] == 1.0 and report["summary"]["total_scenarios"] == 8
    assert set(report["summary"]["avg_scores"]) == {
        "tool_usage",
        "decision_quality",
        "error_handling",
    }
    assert "| Scenario |" in (tmp_path / "base.md").read_text()
    # The model's own share of its findings (issue 40): the good agent adds a sentence a report.
    own = report["summary"]["own_words"]["default"]
    assert own["reports"] > 0 and 0 < own["share"] < 1
    assert "The model's own words (default profile):" in (tmp_path / "base.md").read_text()
    # And how much of it holds: its own sentences ("Risk: payment needs attention.") carry no
    # figure to check, and none is wrong.
    assert own["reports_with_own_words"] == own["reports"]
    assert own["held"] is not None and own["unchecked"] is not None
    assert own["held"] + own["unchecked"] == pytest.approx(1.0)
    assert "hold (found in the data)" in out and "0% wrong or not in the data" in out
    # Every report filed after reading the summary was checked, and kept the policy's evidence.
    kept = _kept_checks(baseline)
    assert set(kept) == {
        "high_payment_failures",
        "high_auth_single_failure",
        "injection_in_changes",
        "medium_elevated_error_rate",
        "low_clean_docs",
        "low_dependency_bump",
    }
    assert all(all(trials) for trials in kept.values())

    # 2. A worse agent: wrong severities, a skipped tool (twice: once trying to report on a
    #    release that does not exist), an invented figure, a provider failure. The gate fails
    #    (exit code 1).
    worse, out, error = run_evals(
        llm,
        ScriptedAgent("good", faults=WORSE_FAULTS),
        "--compare",
        f"--json={tmp_path / 'worse.json'}",
        f"--markdown={tmp_path / 'worse.md'}",
    )
    assert error is not None and error.returncode == 1, out
    assert "Verdict: FAIL" in out
    summary = worse.run_summary()
    assert summary is not None
    assert summary.errored == 2  # the provider failures, counted apart
    statuses = {s.scenario_id: s.status for s in summary.scenarios}
    assert statuses["low_dependency_bump"] == "errored"
    for scenario_id in (
        "high_payment_failures",
        "injection_in_changes",
        "high_auth_single_failure",
        "medium_elevated_error_rate",
        "release_not_found",
        "low_clean_docs",
    ):
        assert statuses[scenario_id] == "failed", scenario_id
    # The report that left out the policy's evidence fails on that, a critical check.
    dropped = next(s for s in summary.scenarios if s.scenario_id == "low_clean_docs")
    assert any(KEPT in r for r in dropped.failure_reasons), dropped.failure_reasons
    assert _kept_checks(worse)["low_clean_docs"] == [False, False]
    reasons = " ".join(
        r for s in summary.scenarios for r in s.failure_reasons if s.scenario_id != "low_clean_docs"
    )
    assert "invent" in reasons.lower() or "made up" in reasons.lower()
    # The invented "42.7%" is the model's own and wrong: the figure says so.
    worse_own = json.loads((tmp_path / "worse.json").read_text())["summary"]["own_words"]
    wrong = 1 - worse_own["default"]["held"] - worse_own["default"]["unchecked"]
    assert wrong > 0.01, worse_own
    # Each stored report's figures: the invented figure's reports hold less than all.
    each = {(r["scenario"], r["trial"]): r for r in worse_own["default"]["per_report"]}
    assert len(each) == worse_own["default"]["reports"]
    invented = each[("medium_elevated_error_rate", 1)]
    assert invented["share"] > 0 and invented["held"] + invented["unchecked"] < 1
    assert "wrong or not in the data" in (tmp_path / "worse.md").read_text()
    analysis = json.loads((tmp_path / "worse.json").read_text())["regression_analysis"]
    assert analysis["verdict"] == "fail"
    regressed = {r["key"] for r in analysis["regressions"]}
    assert {"high_payment_failures", "release_not_found"} <= regressed
    assert "fail" in (tmp_path / "worse.md").read_text().lower()
    # Not a real release was touched; the filed reports stayed on the trials.
    assert not RiskReport.objects.exists()
    trials = Conversation.objects.filter(eval_results__run=worse)
    assert not trials.filter(status=RunStatus.RUNNING).exists()

    # 3. An equally good agent, in other words: the gate passes.
    same, out, error = run_evals(llm, ScriptedAgent("reworded"), "--compare")
    assert error is None, out
    assert "Verdict: PASS" in out

    # The pages show it all.
    evals_page = admin_client.get(reverse("evals:list")).content.decode()
    for run in (baseline, worse, same):
        assert reverse("evals:run", args=[run.pk]) in evals_page
    compare = admin_client.get(reverse("evals:compare", args=[worse.pk])).content.decode()
    assert "ev-verdict-fail" in compare and "ev-change-tag-regression" in compare
    run_page = admin_client.get(reverse("evals:run", args=[worse.pk])).content.decode()
    any_trial = worse.results.exclude(conversation=None).first()
    assert any_trial is not None
    assert reverse("releases:run", args=[any_trial.conversation_id]) in run_page
    transcript = admin_client.get(reverse("releases:run", args=[any_trial.conversation_id]))
    assert transcript.status_code == 200
    admin_page = admin_client.get(reverse("admin:evals_evalrun_compare", args=[worse.pk]))
    assert "FAIL" in admin_page.content.decode()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scenarios=no_such_*"], "no scenario matches"),
        (["--compare"], "no baseline"),
        (["--compare=424242"], "No eval run '424242'"),
        (["--trials=0"], "at least 1"),
        (["--provider=nonsense"], "unknown provider"),
    ],
)
def test_usage_problems_are_one_line_errors(args: list[str], message: str) -> None:
    with pytest.raises(CommandError) as caught:
        call_command(
            "run_evals",
            "--provider=openai-compatible",
            f"--base-url={LLM_URL}",
            *args,
            stdout=StringIO(),
        )
    assert caught.value.returncode == 2
    assert message.lower() in str(caught.value).lower()
    assert "\n" not in str(caught.value)
    assert not EvalRun.objects.exists()


def test_a_run_whose_every_trial_errors_fails(llm: respx.MockRouter) -> None:
    faults: dict[str, Any] = dict.fromkeys(SCENARIOS.split(","), "provider_error")
    run, _, error = run_evals(llm, ScriptedAgent("good", faults=faults))
    assert error is not None and error.returncode == 1
    assert run.status == RunStatus.FAILED and "Every trial errored" in run.error
    assert run.results.filter(passed__isnull=True).count() == 16


def test_scenarios_made_of_files_are_ingested_once_and_their_trials_read_them(
    llm: respx.MockRouter,
) -> None:
    made_of_files = "--scenarios=new_failure_after_payment_change,known_flaky_failures"
    first, out, error = run_evals(llm, ScriptedAgent("good"), made_of_files)
    assert error is None, out
    assert first.results.count() == 4 and first.pass_rate == 1.0
    trials = Conversation.objects.filter(eval_results__run=first)
    releases = {trial.metadata["eval"]["release_pk"] for trial in trials}
    assert len(releases) == 2
    ingested = Release.objects.filter(pk__in=releases).select_related("service")
    assert {r.version for r in ingested} == {"v31.1.0", "v30.1.0"}
    assert all(r.service.hidden and r.service.slug.startswith("eval-") for r in ingested)
    # What the trial filed was judged on the ingested release: two new payment failures.
    filed = {t.metadata["eval_report"]["latest"]["severity"] for t in trials}
    assert filed == {"high", "low"}
    payment = trials.filter(metadata__eval__scenario_id="new_failure_after_payment_change")
    assert {t.metadata["eval_report"]["latest"]["policy_severity"] for t in payment} == {"high"}

    # A second run ingests nothing new: the same releases, no new ingestion.
    ingestions = Ingestion.objects.count()
    second, out, error = run_evals(llm, ScriptedAgent("good"), made_of_files)
    assert error is None, out
    again = Conversation.objects.filter(eval_results__run=second)
    assert {trial.metadata["eval"]["release_pk"] for trial in again} == releases
    assert Ingestion.objects.count() == ingestions
    assert not RiskReport.objects.exists()


def test_the_scenarios_with_a_known_culprit_pass_with_the_report_naming_it(
    llm: respx.MockRouter,
) -> None:
    culprits = (
        "--scenarios=culprit_python_remote_surcharge,culprit_java_reservation_off_by_one,"
        "culprit_js_category_coupon"
    )
    run, out, error = run_evals(llm, ScriptedAgent("good"), culprits, "--trials=1")
    assert error is None, out
    assert run.results.count() == 3 and run.pass_rate == 1.0, out
    for result in run.results.all():
        checks = result.scores["scores"]["decision_quality"]["checks"]
        named = [c for c in checks if c["name"] == "names the culprit"]
        assert len(named) == 1 and named[0]["passed"], (result.scenario_id, checks)
        # The agent asked for a failure's suspects before filing (the larger models' profile).
        tools = result.scores["scores"]["tool_usage"]["checks"]
        asked = [c for c in tools if c["name"] == "called get_failure_suspects before filing"]
        assert len(asked) == 1 and asked[0]["passed"], (result.scenario_id, tools)
