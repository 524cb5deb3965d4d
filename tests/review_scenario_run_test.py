"""A reviewer's override, exported as an eval scenario, is picked up and run by `run_evals`
like any scenario of the suite: the scripted eval agent (tests/eval_agents.py) that files the
decided severity passes it, one that files another severity fails it."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
import respx
from django.core.management import call_command

from evals.models import EvalRun
from evals.scenario import load_suite
from releases import services
from releases.models import RiskReport
from review import services as review_services
from tests.eval_agents import MODEL, ScriptedAgent

pytestmark = pytest.mark.django_db(transaction=True)

LLM_URL = "http://llm.test/v1"


@pytest.fixture
def llm() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        yield router


def run_review_scenarios(router: respx.MockRouter, agent: ScriptedAgent) -> tuple[EvalRun, str]:
    router.routes.clear()
    router.post(f"{LLM_URL}/chat/completions").mock(side_effect=agent)
    out = StringIO()
    call_command(
        "run_evals",
        "--trials=1",
        "--scenarios=tag:from-review",
        "--tool-timeout=2",
        "--provider=openai-compatible",
        f"--model={MODEL}",
        f"--base-url={LLM_URL}",
        stdout=out,
    )
    return EvalRun.objects.latest("created_at", "id"), out.getvalue()


def test_an_exported_override_runs_as_a_scenario(
    llm: respx.MockRouter, settings, tmp_path: Path, django_user_model
) -> None:
    settings.DETECTIVE_REVIEW_SCENARIOS_DIR = tmp_path
    release = services.create_release(
        version="v7.4.0",
        title="Refund rounding",
        changes=["Round refunds to the currency's minor unit"],
        test_results={"passed": 210, "failed": 1, "skipped": 0, "failing_tests": ["test_refund"]},
        deployment_metrics={"error_rate": 0.004, "response_time_p95": 310},
    )
    report = RiskReport.objects.create(release=release, severity="medium", findings=["1 failed"])
    reviewer = django_user_model.objects.create(username="rm")
    decision = review_services.decide_report(
        report, reviewer, decision="override", severity="high", reason="Refunds are money."
    )
    review_services.export_scenario(decision)
    decision.refresh_from_db()

    suite = load_suite(extra_dirs=[tmp_path])
    run, out = run_review_scenarios(llm, ScriptedAgent(suite=suite))
    assert decision.scenario_id in out
    (result,) = run.results.all()
    assert result.scenario_id == decision.scenario_id
    assert result.passed, result.scores
    assert "+review." in run.suite_version

    worse = ScriptedAgent(suite=suite, faults={decision.scenario_id: "wrong_severity"})
    run, _ = run_review_scenarios(llm, worse)
    (result,) = run.results.all()
    assert result.passed is False
    trial = result.trial_result()
    assert trial is not None and trial.severity_filed == "low"
