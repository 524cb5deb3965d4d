from __future__ import annotations

from evals.evaluators.decision_quality import DecisionQualityEvaluator, severity_credit
from evals.runner.transcript import Transcript
from evals.scenario import Scenario, Suite
from risk import filing, policy
from risk.digest import digest
from tests.transcripts import TESTDATA, case


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


def test_decision_quality_does_not_apply_without_a_severity(suite: Suite) -> None:
    _, transcript = case(TESTDATA / "good_release_not_found.json")
    assert DecisionQualityEvaluator().evaluate(suite.get("release_not_found"), transcript) is None


def _with_report(transcript: Transcript, *findings: str) -> Transcript:
    report = transcript.filed_report()
    assert report is not None
    return transcript.model_copy(
        update={"report": report.model_copy(update={"findings": list(findings), "summary": ""})}
    )


def test_a_report_the_api_would_flag_fails_its_trial(suite: Suite) -> None:
    scenario = suite.get("high_payment_failures")  # error rate 7 %, failing payment tests
    _, good = case(TESTDATA / "good_high_payment.json")
    honest = DecisionQualityEvaluator().evaluate(scenario, good)
    assert honest is not None and honest.passed, honest.checks
    # Figures right, the claim in words false: the API's grounding contradicts it.
    flagged = _with_report(
        good, "Metrics stable", "8 failed tests, among them payment capture", "Error rate 7 %"
    )
    score = DecisionQualityEvaluator().evaluate(scenario, flagged)
    assert score is not None and not score.passed
    failed = {c.name: c.detail for c in score.failed_checks}
    assert "nothing the API would flag" in failed
    assert "Metrics stable" in failed["nothing the API would flag"]


def test_the_problems_the_api_recorded_at_filing_are_what_it_would_flag(suite: Suite) -> None:
    # A scenario made of files is judged by the API with the release's history: its medians
    # ("from a median of 0.1 % to 1.55 %") are not in the summary the evaluator re-judges.
    summary_only = suite.get("high_payment_failures")
    made_of_files = suite.get("known_flaky_failures").sources
    scenario = summary_only.model_copy(update={"sources": made_of_files})
    _, good = case(TESTDATA / "good_high_payment.json")
    report = good.filed_report()
    assert report is not None

    def scored(problems: list[str], scenario: Scenario = scenario) -> dict[str, str]:
        recorded = good.model_copy(
            update={"report": report.model_copy(update={"problems": problems})}
        )
        score = DecisionQualityEvaluator().evaluate(scenario, recorded)
        assert score is not None
        return {c.name: c.detail for c in score.failed_checks}

    assert "nothing the API would flag" not in scored([])
    assert "nothing the API would flag" not in scored(["severity low is below the policy's high"])
    assert scored(["not grounded: finding 2"])["nothing the API would flag"] == (
        "not grounded: finding 2"
    )
    # A scenario of the summary alone is re-judged here as before, whatever was recorded.
    assert "nothing the API would flag" not in scored(["not grounded: 2"], summary_only)


def test_the_policys_own_sentences_pass_the_apis_check_on_every_scenario(suite: Suite) -> None:
    """A small model copies the policy's evidence: those sentences must never be flagged."""
    checked = 0
    for scenario in suite.scenarios:
        payload = scenario.release_payload()
        if not payload:
            continue
        verdict = policy.evaluate(payload)
        decision = filing.decide(
            severity=verdict.severity,
            findings=verdict.evidence(),
            summary="",
            data=payload,
            verdict=verdict,
            refused_before=False,
            shown=digest(payload, verdict, version=1),
            summary_read=True,
        )
        flagged = [p for p in decision.problems if "addressed to the assessor" not in p]
        assert flagged == [], scenario.id
        labels = {part.label for part in decision.grounding.parts}
        assert labels == {"figures found in the data"}, (scenario.id, labels)
        checked += 1
    assert checked >= 20


def test_the_floor_is_the_apis_when_it_judged_the_release_with_its_history(suite: Suite) -> None:
    scenario = suite.get("low_clean_docs")  # the summary alone says low
    _, good = case(TESTDATA / "good_low_clean.json")
    report = good.filed_report()
    assert report is not None and report.severity == "low"
    passed = DecisionQualityEvaluator().evaluate(scenario, good)
    assert passed is not None and passed.passed
    # The API judged the release with its history and found medium: low is below it.
    judged = good.model_copy(
        update={"report": report.model_copy(update={"policy_severity": "medium"})}
    )
    score = DecisionQualityEvaluator().evaluate(scenario, judged)
    assert score is not None
    failed = {c.name: c.detail for c in score.failed_checks}
    assert failed["not below the risk policy"] == "filed low, the policy gives medium"
    # Lower too: the summary alone says high (payment failures), the history excused them.
    scenario = suite.get("high_payment_failures")
    _, payment = case(TESTDATA / "good_high_payment.json")
    filed = payment.filed_report()
    assert filed is not None
    excused = payment.model_copy(
        update={
            "report": filed.model_copy(update={"severity": "medium", "policy_severity": "medium"})
        }
    )
    lowered = DecisionQualityEvaluator().evaluate(scenario, excused)
    assert lowered is not None
    assert "not below the risk policy" not in {c.name for c in lowered.failed_checks}
