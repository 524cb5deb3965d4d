from __future__ import annotations

from evals.evaluators.decision_quality import DecisionQualityEvaluator, severity_credit
from evals.scenario import Suite
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
