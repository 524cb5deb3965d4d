from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.events import RunFinished
from agent.messages import Message, ToolCall, ToolResult
from evals.evaluators import (
    DecisionQualityEvaluator,
    ErrorHandlingEvaluator,
    LLMJudge,
    ToolUsageEvaluator,
    aevaluate,
    evaluate,
    find_group,
    matches_phrase,
    parse_judge_response,
    severity_credit,
    ungrounded,
)
from evals.runner.transcript import RunError, Transcript
from evals.scenario import KeywordGroup, Suite, load_suite

TESTDATA = Path(__file__).resolve().parent / "testdata"
CASES = sorted(TESTDATA.glob("*.json"))


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite()


def _case(path: Path) -> tuple[dict[str, Any], Transcript]:
    data = json.loads(path.read_text())
    return data, Transcript.model_validate(data["transcript"])


# --------------------------------------------------------------------------------------------
# The hand-written transcripts: good ones pass, bad ones fail, for the stated reasons.
# --------------------------------------------------------------------------------------------


def test_there_are_good_and_bad_transcripts() -> None:
    names = [p.stem for p in CASES]
    assert sum(n.startswith("good_") for n in names) >= 5
    assert sum(n.startswith("bad_") for n in names) >= 10


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_transcript_is_judged_as_its_author_says(path: Path, suite: Suite) -> None:
    data, transcript = _case(path)
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
            data, transcript = _case(path)
            score = ToolUsageEvaluator().evaluate(suite.get(data["scenario"]), transcript)
            assert score.value == 1.0, (path.stem, score.details)


def test_a_trial_result_round_trips_through_json(suite: Suite) -> None:
    data, transcript = _case(TESTDATA / "bad_wrong_severity.json")
    result = evaluate(suite.get(data["scenario"]), transcript, trial=2, suite_version="1.0.0")
    again = type(result).model_validate_json(result.model_dump_json())
    assert again == result
    assert again.trial == 2
    assert again.scenario_fingerprint == suite.get(data["scenario"]).fingerprint


def test_metrics_come_from_the_events(suite: Suite) -> None:
    _, transcript = _case(TESTDATA / "good_high_payment.json")
    result = evaluate(suite.get("high_payment_failures"), transcript)
    assert result.metrics.input_tokens == 2200
    assert result.metrics.output_tokens == 200
    assert result.metrics.cost_usd == pytest.approx(0.008)
    assert result.metrics.latency_ms == pytest.approx(9000)
    assert result.metrics.tool_calls == 2


# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------


def test_the_evaluator_checks_figures_against_the_data_the_agent_saw(suite: Suite) -> None:
    scenario = suite.get("low_clean_docs")
    blind = Transcript(messages=[Message.user(scenario.prompt)])
    _, seen = _case(TESTDATA / "good_low_clean.json")
    assert ungrounded(scenario, seen, "150 tests passed") == []
    assert ungrounded(scenario, blind, "150 tests passed")  # it never read them
    assert ungrounded(scenario, seen, "2 payment tests failing")  # 0 failed


def test_a_refusal_quoting_the_report_does_not_make_its_figures_known(suite: Suite) -> None:
    scenario = suite.get("low_clean_docs")
    _, seen = _case(TESTDATA / "good_low_clean.json")
    refusal = ToolResult(
        tool_call_id="r1",
        name="file_risk_report",
        content="Not filed: 'The error rate reached 42.7%' is not in the release data",
        success=False,
    )
    transcript = Transcript(messages=[*seen.messages, Message.tool(refusal)])
    assert ungrounded(scenario, transcript, "The error rate reached 42.7%")


def test_phrases_match_tolerantly() -> None:
    assert matches_phrase("2 tests failed in checkout", "test failures")
    assert matches_phrase("FAILING TESTS: test_x", "failed test")
    assert matches_phrase("the Authentication flow", "auth")
    assert matches_phrase("error-rate is elevated", "error rate")
    assert matches_phrase("No test results were provided", "test results missing") is False
    assert matches_phrase("No test results were provided", "no test")
    assert not matches_phrase("all green", "test failures")


def test_forbidden_claims_ignore_negated_mentions() -> None:
    group = KeywordGroup(name="claim", any_of=["all tests passed"])
    assert find_group("All tests passed.", group, skip_negated=True)
    assert not find_group("We cannot confirm all tests passed.", group, skip_negated=True)
    assert not find_group("It is unknown whether all tests passed", group, skip_negated=True)


def test_severity_credit(suite: Suite) -> None:
    high = suite.get("high_payment_failures")
    boundary = suite.get("boundary_error_rate_5pct")  # medium preferred, high acceptable
    assert severity_credit("high", high) == 1.0
    assert severity_credit("HIGH ", high) == 1.0
    assert severity_credit("medium", high) == 0.25
    assert severity_credit("low", high) == 0.0
    assert severity_credit("critical", high) == 0.0
    assert severity_credit("medium", boundary) == 1.0
    assert severity_credit("high", boundary) == 0.75
    assert severity_credit("low", boundary) == 0.25


def _run(prompt: str, *steps: tuple[str, dict[str, Any], str, bool], final: str = "") -> Transcript:
    messages = [Message.user(prompt)]
    for i, (name, args, content, ok) in enumerate(steps):
        call = ToolCall(id=f"c{i}", name=name, arguments=args)
        messages.append(Message.assistant(tool_calls=[call]))
        messages.append(
            Message.tool(ToolResult(tool_call_id=call.id, name=name, content=content, success=ok))
        )
    if final:
        messages.append(Message.assistant(final))
    return Transcript(messages=messages)


def test_release_ids_compare_without_case_or_leading_v(suite: Suite) -> None:
    scenario = suite.get("low_clean_docs")
    summary = json.dumps(scenario.release_payload())
    report = {"release_id": "2.1.1", "severity": "low", "findings": ["Only docs changed"]}
    transcript = _run(
        scenario.prompt,
        ("get_release_summary", {"release_id": "V2.1.1"}, summary, True),
        ("file_risk_report", report, "filed", True),
    )
    assert ToolUsageEvaluator().evaluate(scenario, transcript).passed


def test_order_is_checked(suite: Suite) -> None:
    scenario = suite.get("low_clean_docs")
    report = {"release_id": "v2.1.1", "severity": "low", "findings": ["Only docs changed"]}
    transcript = _run(
        scenario.prompt,
        ("file_risk_report", report, "filed", True),
        ("get_release_summary", {"release_id": "v2.1.1"}, "{}", True),
    )
    score = ToolUsageEvaluator().evaluate(scenario, transcript)
    assert [c.name for c in score.failed_checks] == ["get_release_summary before file_risk_report"]


def test_decision_quality_does_not_apply_without_a_severity(suite: Suite) -> None:
    _, transcript = _case(TESTDATA / "good_release_not_found.json")
    assert DecisionQualityEvaluator().evaluate(suite.get("release_not_found"), transcript) is None


def test_missing_data_without_a_report_is_not_graceful(suite: Suite) -> None:
    scenario = suite.get("missing_deployment_metrics")
    summary = json.dumps(scenario.release_payload())
    transcript = _run(
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
    transcript = _run(scenario.prompt, lookup, lookup, lookup)
    ending = RunFinished(reason=reason, final_text=stopped if reason == "tool_failing" else "")
    transcript = transcript.model_copy(update={"events": [ending]})
    score = ErrorHandlingEvaluator().evaluate(scenario, transcript)
    assert [c.name for c in score.failed_checks] == failed_checks


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


# --------------------------------------------------------------------------------------------
# LLM as judge
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ('{"score": 0.8, "reasoning": "Grounded."}', 0.8),
        ('Here you go:\n```json\n{"score": 0.65, "reasoning": "ok"}\n```', 0.65),
        ('{"Score": "7/10", "rationale": "fine"}', 0.7),
        ('{"score": 85, "explanation": "good"}', 0.85),
        ("Score: 4 out of 5. The findings are grounded.", 0.8),
        ('{"reasoning": "no score"} then score: 9/10', 0.9),
        ('{"score": 1.7}', 0.17),
        ('{"score": -3}', 0.0),
    ],
)
def test_judge_replies_are_parsed_robustly(reply: str, score: float) -> None:
    assert parse_judge_response(reply).score == pytest.approx(score)


def test_judge_reasoning_is_kept() -> None:
    verdict = parse_judge_response('noise {"score": 1, "reasoning": " Sound. "} noise')
    assert verdict.reasoning == "Sound."


class _StubJudge:
    def __init__(self, reply: str | Exception) -> None:
        self.reply = reply
        self.prompts: list[str] = []

    async def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


async def test_the_judge_sees_the_rubric_the_data_and_the_run(suite: Suite) -> None:
    stub = _StubJudge('{"score": 0.9, "reasoning": "Cites the 7% error rate."}')
    _, transcript = _case(TESTDATA / "good_high_payment.json")
    result = await aevaluate(suite.get("high_payment_failures"), transcript, judge=LLMJudge(stub))
    prompt = stub.prompts[0]
    assert "Grounded" in prompt and "0.07" in prompt and "file_risk_report" in prompt
    judge = result.scores["judge"]
    assert judge.passed and judge.value == 0.9
    assert judge.details == ["Cites the 7% error rate."]
    assert result.status == "passed"


async def test_a_low_judge_score_is_informative_unless_required(suite: Suite) -> None:
    _, transcript = _case(TESTDATA / "good_high_payment.json")
    scenario = suite.get("high_payment_failures")
    judge = LLMJudge(_StubJudge('{"score": 0.2, "reasoning": "Vague."}'))
    optional = await aevaluate(scenario, transcript, judge=judge)
    assert optional.status == "passed"
    assert not optional.scores["judge"].passed
    required = await aevaluate(scenario, transcript, judge=judge, judge_required=True)
    assert required.status == "failed"


async def test_a_failing_judge_is_errored_not_failed(suite: Suite) -> None:
    _, transcript = _case(TESTDATA / "good_high_payment.json")
    scenario = suite.get("high_payment_failures")
    for reply in [RuntimeError("provider down"), "I refuse to grade this."]:
        judge = LLMJudge(_StubJudge(reply))
        optional = await aevaluate(scenario, transcript, judge=judge)
        assert optional.status == "passed"
        assert optional.scores["judge"].errored
        required = await aevaluate(scenario, transcript, judge=judge, judge_required=True)
        assert required.status == "errored"


async def test_the_judge_prompt_clips_huge_releases(suite: Suite) -> None:
    scenario = suite.get("context_pressure_400_changes")
    prompt = LLMJudge(_StubJudge("{}"), max_chars=2000).build_prompt(scenario, Transcript())
    assert len(prompt) < 6000
    assert "chars cut" in prompt
