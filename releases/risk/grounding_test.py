"""Grounding, on labelled findings: invented counts, invented failures, legitimate derived
figures, and figures that match only by coincidence."""

from __future__ import annotations

from typing import Any

import pytest

from releases.risk.grounding import ground_report, ground_text
from releases.risk.policy import evaluate

CLEAN: dict[str, Any] = {
    "changes": ["Documentation updates", "Fix typo in the footer"],
    "tests": {"passed": 150, "failed": 0, "skipped": 2},
    "deployment_metrics": {"error_rate": 0.004, "response_time_p95": 380},
}
FAILING: dict[str, Any] = {
    "changes": ["Rewrite payment processing", "Update checkout button styles"],
    "tests": {
        "passed": 120,
        "failed": 8,
        "skipped": 2,
        "failing_tests": [
            "test_payment_capture_idempotent",
            "test_payment_refund_partial",
            "test_checkout_total_with_tax",
            "test_orders_migration_backfill",
            "test_a",
            "test_b",
            "test_c",
            "test_d",
        ],
    },
    "deployment_metrics": {
        "error_rate": 0.07,
        "response_time_p95": 520,
        "response_time_p95_baseline": 410,
    },
}
NO_TESTS: dict[str, Any] = {**CLEAN, "tests": None}


def problems(text: str, data: dict[str, Any]) -> list[str]:
    return ground_text("finding 1", text, data, evaluate(data)).problems


# (text, data, grounded)
LABELLED = [
    # invented counts and failures
    ("2 payment tests failing", CLEAN, False),
    ("1 failed UI test", CLEAN, False),
    ("Payment tests are failing", CLEAN, False),
    ("3 failed tests in checkout", NO_TESTS, False),
    ("Tests failing in auth", NO_TESTS, False),
    ("5 failed tests", FAILING, False),  # it has 8
    # what the data says, in several spellings
    ("8 failed tests, among them payment capture and refund", FAILING, True),
    ("3 payment tests failing", FAILING, True),  # three of the failing tests are payments'
    ("error_rate 0.07 (7%) is above the 5% threshold", FAILING, True),
    ("Error rate 7.0 % in production", FAILING, True),
    ("error rate 0.004 (0.4%)", CLEAN, True),
    ("All 150 tests passed, 0 failed, 2 skipped", CLEAN, True),
    ("No failed tests", CLEAN, True),
    ("No test results: the tests are missing", NO_TESTS, True),
    ("p95 latency 380 ms", CLEAN, True),
    ("p95 latency 0.38 s", CLEAN, True),
    # derived figures, with what they are derived from
    ("152 tests in total", CLEAN, True),
    ("p95 latency up 27% against its baseline (520 ms vs 410 ms)", FAILING, True),
    ("p95 rose by 110 ms", FAILING, True),
    ("error rate 2 points above the 5% threshold", FAILING, True),
    ("93.8% of the executed tests passed", FAILING, True),
    # the same numbers without saying what they are derived from: coincidences
    ("27% of users are affected", FAILING, False),
    ("110 ms added by the new PSP client", FAILING, False),
    # comparisons that the figures contradict
    ("error_rate 0.004 is above the threshold of 0.05", CLEAN, False),
    ("error rate 0.07 is below 0.05", FAILING, False),
    # invented figures of any size
    ("The error rate reached 42.7% in production", CLEAN, False),
    ("p95 latency 1200 ms", CLEAN, False),
    # prose
    ("3 risky areas deserve attention", CLEAN, True),
]


@pytest.mark.parametrize(("text", "data", "grounded"), LABELLED)
def test_labelled_findings(text: str, data: dict[str, Any], grounded: bool) -> None:
    found = problems(text, data)
    assert (not found) == grounded, found


def test_a_problem_quotes_what_is_wrong() -> None:
    found = problems("2 payment tests failing", CLEAN)
    assert any("0 failed tests" in p for p in found)
    assert any("not one of the release's test counts" in p for p in found)


def test_evidence_names_the_field_and_the_signal() -> None:
    grounded = ground_text("finding 1", "error_rate 0.07 (7%)", FAILING, evaluate(FAILING))
    assert grounded.evidence[0] == "0.07 = deployment_metrics.error_rate"
    assert "error_rate" in grounded.signals


def test_a_report_is_grounded_part_by_part() -> None:
    data = FAILING
    report = ground_report(
        ["8 failed tests", "The error rate reached 42.7%"],
        "High: payments fail.",
        data,
        evaluate(data),
    )
    assert [p.grounded for p in report.parts] == [True, False, True]
    assert report.problems() == [
        "finding 2 'The error rate reached 42.7%': 42.7% is not in the release data"
    ]


def test_figures_shown_to_the_model_count_when_given() -> None:
    # The model saw a compact change list ("count": 400): that figure is not in the raw data.
    assert problems("400 changes in this release", CLEAN)
    report = ground_report(["400 changes in this release"], "", CLEAN, extra_known=[400.0])
    assert report.grounded


def test_an_error_rate_may_be_compared_with_a_threshold() -> None:
    data = {**CLEAN, "deployment_metrics": {"error_rate": 0.081, "response_time_p95": 390}}
    text = "error_rate 8.1% is 3.1 percentage points (62%) above the 5% threshold"
    assert problems(text, data) == []
    assert problems("error_rate 8.1% is 9 pp above the threshold", data)


@pytest.mark.parametrize(
    "text", ["Failed tests: 0 failed tests", "Failed tests: none", "Tests failed: 0"]
)
def test_a_signal_label_followed_by_zero_is_no_claim_of_failure(text: str) -> None:
    assert problems(text, CLEAN) == []


@pytest.mark.parametrize(
    "text",
    [
        # What local-model reports said, copying the policy's own signals.
        "Skipped tests: 2 of 152 tests skipped (1 %)",
        "Failed tests: 0 failed tests (less than the threshold of 1 failed test)",
        "Error rate: 0.004 (0.4 %) is below 0.02",
    ],
)
def test_restating_the_policys_signals_is_grounded(text: str) -> None:
    assert problems(text, CLEAN) == []


def test_a_failure_count_still_has_to_be_the_releases() -> None:
    assert problems("1 failed test in checkout", CLEAN)
    assert problems("9 failed tests", FAILING)


def test_the_count_of_failing_tests_in_all_critical_areas_together_is_grounded() -> None:
    # The policy's own wording, measured on the local model: 3 of 8 named are payments', one
    # is a migration's, so 4 are in a critical area.
    assert problems("4 failing tests in migrations, payments", FAILING) == []


def test_a_comparison_is_read_only_between_a_subject_and_its_own_threshold() -> None:
    text = "an error rate above 0.05, and a p95 latency above 1000 ms"
    data = {**CLEAN, "deployment_metrics": {"error_rate": 0.07, "response_time_p95": 1200}}
    assert problems(text, data) == []
    low = {**CLEAN, "deployment_metrics": {"error_rate": 0.031, "response_time_p95": 480}}
    assert problems("error rate 0.031 (3.1 %), which is above the threshold of 0.05", low) == [
        "3.1 % is not above 0.05"
    ]
