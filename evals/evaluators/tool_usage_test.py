from __future__ import annotations

import json

from evals.evaluators.tool_usage import ToolUsageEvaluator
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
