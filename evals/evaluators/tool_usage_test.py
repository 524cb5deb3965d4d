from __future__ import annotations

import json

from evals.evaluators.tool_usage import ToolUsageEvaluator
from evals.runner.transcript import Transcript
from evals.scenario import Suite
from tests.transcripts import tool_run


def test_release_ids_compare_without_case_or_leading_v(suite: Suite) -> None:
    scenario = suite.get("low_clean_docs")
    summary = json.dumps(scenario.release_payload())
    report = {"release_id": "2.1.1", "severity": "low", "findings": ["Only docs changed"]}
    transcript = tool_run(
        scenario.prompt,
        ("get_release_summary", {"release_id": "V2.1.1"}, summary, True),
        ("file_risk_report", report, "filed", True),
    )
    assert ToolUsageEvaluator().evaluate(scenario, transcript).passed


def test_order_is_checked(suite: Suite) -> None:
    scenario = suite.get("low_clean_docs")
    report = {"release_id": "v2.1.1", "severity": "low", "findings": ["Only docs changed"]}
    transcript = tool_run(
        scenario.prompt,
        ("file_risk_report", report, "filed", True),
        ("get_release_summary", {"release_id": "v2.1.1"}, "{}", True),
    )
    score = ToolUsageEvaluator().evaluate(scenario, transcript)
    assert [c.name for c in score.failed_checks] == ["get_release_summary before file_risk_report"]


def _payment_run(*drill_downs: str, offered: list[str] | None) -> Transcript:
    report = {"release_id": "v31.1.0", "severity": "high", "findings": ["Refunds fail"]}
    calls = [("get_release_summary", {"release_id": "v31.1.0"}, "{}", True)]
    calls += [(tool, {"release_id": "v31.1.0"}, "{}", True) for tool in drill_downs]
    transcript = tool_run(
        "Assess the risk of release v31.1.0", *calls, ("file_risk_report", report, "filed", True)
    )
    return transcript.model_copy(update={"tools_offered": offered})


def test_the_failing_tests_are_looked_at_before_filing_where_the_tool_was_offered(
    suite: Suite,
) -> None:
    scenario = suite.get("new_failure_after_payment_change")
    drill_downs = ["get_test_details", "get_code_changes"]
    assert scenario.expect.tools.must_call_before_filing == drill_downs
    large = ["get_release_summary", *drill_downs, "file_risk_report"]
    evaluator = ToolUsageEvaluator()

    skipped = evaluator.evaluate(scenario, _payment_run("get_code_changes", offered=large))
    assert [c.name for c in skipped.failed_checks] == ["called get_test_details before filing"]
    looked = evaluator.evaluate(scenario, _payment_run(*drill_downs, offered=large))
    assert looked.passed
    assert {"called get_test_details before filing", "called get_code_changes before filing"} <= {
        c.name for c in looked.checks
    }
    # The small profile has no drill-downs: nothing to ask of it.
    small = evaluator.evaluate(scenario, _payment_run(offered=large[::3]))
    assert small.passed
    assert not any("before filing" in c.name for c in small.checks)
