"""A whole trial: the hand-written transcripts are judged as their authors say."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.messages import Message
from evals.evaluators.tool_usage import ToolUsageEvaluator
from evals.evaluators.trial import evaluate
from evals.runner.transcript import RunError, Transcript
from evals.scenario import Suite
from tests.transcripts import CASES, TESTDATA, case


def test_there_are_good_and_bad_transcripts() -> None:
    names = [p.stem for p in CASES]
    assert sum(n.startswith("good_") for n in names) >= 5
    assert sum(n.startswith("bad_") for n in names) >= 10


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_transcript_is_judged_as_its_author_says(path: Path, suite: Suite) -> None:
    data, transcript = case(path)
    expect = data["expect"]
    result = evaluate(suite.get(data["scenario"]), transcript)

    assert result.status == expect["status"], result.failure_reasons
    if expect["status"] == "passed":
        assert all(score.passed for score in result.scores.values()), result.failure_reasons
        assert not result.critical_failures
    for dimension, passed in expect.get("dimensions", {}).items():
        assert result.scores[dimension].passed is passed, (dimension, result.failure_reasons)
    failed = {f"{dim}: {c.name}" for dim, s in result.scores.items() for c in s.failed_checks}
    for check in expect.get("failed_checks", []):
        assert check in failed, (check, sorted(failed))
    if "critical" in expect:
        assert bool(result.critical_failures) is expect["critical"], result.critical_failures
    for dimension, ceiling in expect.get("scores_below", {}).items():
        assert result.scores[dimension].value < ceiling


def test_good_transcripts_score_full_marks_on_tool_usage(suite: Suite) -> None:
    for path in CASES:
        if path.stem.startswith("good_"):
            data, transcript = case(path)
            score = ToolUsageEvaluator().evaluate(suite.get(data["scenario"]), transcript)
            assert score.value == 1.0, (path.stem, score.details)


def test_a_trial_result_round_trips_through_json(suite: Suite) -> None:
    data, transcript = case(TESTDATA / "bad_wrong_severity.json")
    result = evaluate(suite.get(data["scenario"]), transcript, trial=2, suite_version="1.0.0")
    again = type(result).model_validate_json(result.model_dump_json())
    assert again == result
    assert again.trial == 2
    assert again.scenario_fingerprint == suite.get(data["scenario"]).fingerprint


def test_metrics_come_from_the_events(suite: Suite) -> None:
    _, transcript = case(TESTDATA / "good_high_payment.json")
    result = evaluate(suite.get("high_payment_failures"), transcript)
    assert result.metrics.input_tokens == 2200
    assert result.metrics.output_tokens == 200
    assert result.metrics.cost_usd == pytest.approx(0.008)
    assert result.metrics.latency_ms == pytest.approx(9000)
    assert result.metrics.tool_calls == 2


def test_a_provider_failure_errors_while_a_crash_fails(suite: Suite) -> None:
    scenario = suite.get("low_clean_docs")
    for error_type, status in [
        ("RateLimitError", "errored"),
        ("ServerError", "errored"),
        ("ProviderTimeoutError", "errored"),
        ("ConfigurationError", "errored"),
        ("TypeError", "failed"),
    ]:
        transcript = Transcript(
            messages=[Message.user(scenario.prompt)], error=RunError(error_type=error_type)
        )
        result = evaluate(scenario, transcript)
        assert result.status == status, error_type
        assert (result.scores == {}) is (status == "errored")
