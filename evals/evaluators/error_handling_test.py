from __future__ import annotations

import json

import pytest

from agent.events import RunFinished
from evals.evaluators.error_handling import ErrorHandlingEvaluator
from evals.scenario import Suite
from tests.transcripts import tool_run


def test_missing_data_without_a_report_is_not_graceful(suite: Suite) -> None:
    scenario = suite.get("missing_deployment_metrics")
    summary = json.dumps(scenario.release_payload())
    transcript = tool_run(
        scenario.prompt,
        ("get_release_summary", {"release_id": "v4.2.0"}, summary, True),
        final="There are no deployment metrics, so I cannot assess this release.",
    )
    score = ErrorHandlingEvaluator().evaluate(scenario, transcript)
    assert [c.name for c in score.failed_checks] == ["degraded gracefully on missing data"]


@pytest.mark.parametrize(
    ("reason", "failed_checks"),
    [("tool_failing", []), ("max_steps", ["run completed", "failure stated plainly"])],
)
def test_stopping_on_a_tool_that_keeps_failing_is_a_graceful_end(
    suite: Suite, reason: str, failed_checks: list[str]
) -> None:
    scenario = suite.get("release_not_found")
    missing = "Release 'v99.99.99' does not exist (the release API answered 404 Not Found)."
    lookup = ("get_release_summary", {"release_id": "v99.99.99"}, missing, False)
    stopped = f"Stopped: get_release_summary kept failing with the same error. {missing}"
    transcript = tool_run(scenario.prompt, lookup, lookup, lookup)
    ending = RunFinished(reason=reason, final_text=stopped if reason == "tool_failing" else "")
    transcript = transcript.model_copy(update={"events": [ending]})
    score = ErrorHandlingEvaluator().evaluate(scenario, transcript)
    assert [c.name for c in score.failed_checks] == failed_checks
