from __future__ import annotations

import pytest

from evals.evaluators.judge import LLMJudge, parse_judge_response
from evals.evaluators.trial import aevaluate
from evals.runner.transcript import Transcript
from evals.scenario import Suite
from tests.transcripts import TESTDATA, case


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


async def test_the_judge_sees_the_rubric_the_data_and_thetool_run(suite: Suite) -> None:
    stub = _StubJudge('{"score": 0.9, "reasoning": "Cites the 7% error rate."}')
    _, transcript = case(TESTDATA / "good_high_payment.json")
    result = await aevaluate(suite.get("high_payment_failures"), transcript, judge=LLMJudge(stub))
    prompt = stub.prompts[0]
    assert "Grounded" in prompt and "0.07" in prompt and "file_risk_report" in prompt
    judge = result.scores["judge"]
    assert judge.passed and judge.value == 0.9
    assert judge.details == ["Cites the 7% error rate."]
    assert result.status == "passed"


async def test_a_low_judge_score_is_informative_unless_required(suite: Suite) -> None:
    _, transcript = case(TESTDATA / "good_high_payment.json")
    scenario = suite.get("high_payment_failures")
    judge = LLMJudge(_StubJudge('{"score": 0.2, "reasoning": "Vague."}'))
    optional = await aevaluate(scenario, transcript, judge=judge)
    assert optional.status == "passed"
    assert not optional.scores["judge"].passed
    required = await aevaluate(scenario, transcript, judge=judge, judge_required=True)
    assert required.status == "failed"


async def test_a_failing_judge_is_errored_not_failed(suite: Suite) -> None:
    _, transcript = case(TESTDATA / "good_high_payment.json")
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
