"""The grounding is right about its reasons (issue 40, item 2): each case a report that is
right (never sent to a person, or for no false reason) or wrong (flagged for the right one).
Measured on the local model: "it calls this a high risk, but the policy gives medium" of a
release the policy gave high; "test_orders_db is not among the failing tests" of the failing
tests' module; "a high error rate of 0.2674 %" (the policy's line: 2 %) not flagged."""

from __future__ import annotations

from typing import Any

import pytest

from risk.filing import decide
from risk.policy import evaluate

# High: an error rate above the 5 % line (critical) and a failed test in a module of JUnit's
# naming, whose failed-tests signal alone counts as medium.
ORDERS: dict[str, Any] = {
    "changes": ["Index the orders table"],
    "tests": {
        "passed": 140,
        "failed": 1,
        "skipped": 0,
        "failing_tests": ["tests.test_orders_db.OrdersDbTest::test_totals[postgres]"],
    },
    "deployment_metrics": {"error_rate": 0.09, "response_time_p95": 300},
}
# Low: an error rate of 0.2674 %, under the 2 % line for medium.
QUIET: dict[str, Any] = {
    "changes": ["Fix a typo"],
    "tests": {"passed": 90, "failed": 0, "skipped": 0},
    "deployment_metrics": {"error_rate": 0.002674, "response_time_p95": 300},
}

CASES = [
    # (data, severity, finding, the reason a person is asked for, or None)
    (ORDERS, "high", "1 failed test in test_orders_db, a high risk with the error rate.", None),
    (ORDERS, "high", "The failing test is OrdersDbTest::test_totals: this is a high risk.", None),
    (ORDERS, "high", "test_totals[postgres] failed: the failed tests are a high risk.", None),
    (ORDERS, "high", "test_orders_db fails.", None),
    (ORDERS, "high", "1 failed test: the release is a high risk.", None),
    (ORDERS, "high", "test_payments_api fails.", "test_payments_api is not among the failing"),
    (ORDERS, "high", "1 failed test, a low risk.", "it calls this a low risk"),
    (QUIET, "low", "An error rate of 0.27 %, below the 2 % line.", None),
    (QUIET, "low", "The error rate is not high: 0.27 %.", None),
    (QUIET, "medium", "A high error rate of 0.2674 %.", "it calls the error rate high, but"),
    (QUIET, "medium", "Elevated errors: 0.27 % of requests.", "it calls the error rate elevated"),
]


@pytest.mark.parametrize(("data", "severity", "finding", "reason"), CASES)
def test_a_report_goes_to_a_person_only_for_a_true_reason(
    data: dict[str, Any], severity: str, finding: str, reason: str | None
) -> None:
    verdict = evaluate(data)
    decision = decide(
        severity=severity,
        findings=[finding],
        summary="",
        data=data,
        verdict=verdict,
        refused_before=True,
    )
    if reason is None:
        assert not decision.needs_review, decision.review_reasons
    else:
        assert any(reason in r for r in decision.review_reasons), decision.review_reasons


def test_the_false_figure_reason_cites_the_policys_line() -> None:
    verdict = evaluate(QUIET)
    decision = decide(
        severity="low",
        findings=["A high error rate of 0.2674 %."],
        summary="",
        data=QUIET,
        verdict=verdict,
        refused_before=True,
    )
    assert any("below the 2 % limit for medium" in r for r in decision.review_reasons)
