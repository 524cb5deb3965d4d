"""Interrupted runs and pytest's subtests in the policy: a partial run is said with its figures
and never green; tests and subtests are counted apart."""

from __future__ import annotations

from typing import Any

import pytest

from risk.claims import check_claims
from risk.history import History
from risk.policy import PolicySettings, evaluate
from risk.run_counts import ran_count, results_said, usual_tests

CLEAN: dict[str, Any] = {
    "changes": ["Fix typo in the footer"],
    "tests": {"passed": 54_136, "failed": 0, "skipped": 0},
    "deployment_metrics": {"error_rate": 0.001, "response_time_p95": 300},
}
USUAL = (("21.3", 54_100), ("21.2", 54_136), ("21.1", 53_990))


def _verdict(tests: dict[str, Any], earlier: tuple[tuple[str, int], ...] = USUAL) -> Any:
    history = History(service="packaging", version="22.0", earlier_test_counts=earlier)
    return evaluate({**CLEAN, "tests": tests}, PolicySettings(), history=history)


def _names(verdict: Any) -> list[str]:
    return [s.name for s in verdict.signals if s.level != "none"]


def test_a_run_where_most_of_the_usual_tests_vanished_is_said_and_never_green() -> None:
    verdict = _verdict({"passed": 412, "failed": 0, "skipped": 0})
    partial = next(s for s in verdict.signals if s.name == "partial_test_run")
    assert partial.level == "medium"
    assert verdict.severity == "medium"
    assert partial.detail.startswith(
        "412 of the usual 54,100 tests ran (the median of the last 3 releases): "
        "the run looks interrupted"
    )
    # "All tests passed" on it is not grounded: its 0 failures cover 412 tests.
    checks = check_claims(
        "All tests passed.",
        {"tests": {"passed": 412, "failed": 0, "skipped": 0}},
        verdict,
        summary_read=True,
        has_figures=False,
    )
    assert [c.outcome for c in checks] == ["contradicts"]
    assert "412 of the usual 54,100" in checks[0].says


def test_a_full_run_and_an_ordinary_shrink_are_not_partial() -> None:
    assert _names(_verdict({"passed": 54_200, "failed": 0, "skipped": 0})) == []
    # Tests removed in a clean-up (a third fewer) are not an interruption.
    assert _names(_verdict({"passed": 36_000, "failed": 0, "skipped": 0})) == []
    # A young suite (under 20 tests usually) is not judged by its share.
    assert _names(_verdict({"passed": 2, "failed": 0, "skipped": 0}, (("1", 6),))) == []
    # No earlier release with results: nothing to compare with.
    assert _names(_verdict({"passed": 5, "failed": 0, "skipped": 0}, ())) == []


def test_a_run_the_runner_marked_interrupted_is_partial_whatever_its_history() -> None:
    verdict = _verdict({"passed": 5, "failed": 0, "skipped": 0, "interrupted": True}, ())
    partial = next(s for s in verdict.signals if s.name == "partial_test_run")
    assert partial.detail.startswith(
        "The runner marked the run interrupted: only 5 tests ran before it stopped"
    )
    assert verdict.severity == "medium"
    with_history = _verdict({"passed": 50_000, "failed": 0, "skipped": 0, "interrupted": True})
    assert "50,000 of the usual 54,100 tests ran" in next(
        s.detail for s in with_history.signals if s.name == "partial_test_run"
    )


def test_nothing_ran_is_said_once_by_no_tests_ran() -> None:
    assert _names(_verdict({"passed": 0, "failed": 0, "skipped": 0})) == ["no_tests_ran"]


def test_failed_subtests_are_counted_apart_from_the_failed_tests() -> None:
    tests = {
        "passed": 1,
        "failed": 2,
        "skipped": 0,
        "failing_tests": ["test_sub::test_many", "test_sub::test_allsub"],
        "not_in_test_cases": 8,
        "failed_subtests": 4,
    }
    verdict = _verdict(tests, ())
    failed = next(s for s in verdict.signals if s.name == "failed_tests")
    assert failed.figure == 2
    assert failed.detail == (
        "2 failed tests: test_sub::test_many, test_sub::test_allsub; 4 of 8 subtests failed"
    )
    assert results_said(tests) == "3 tests (2 failed, 1 passed) and 8 subtests (4 failed)"


@pytest.mark.parametrize(
    ("tests", "ran"),
    [
        ({"passed": 3, "failed": 1, "skipped": 2, "xfailed": 1}, 7),
        ({"passed": 3}, 3),
        ({}, None),
    ],
)
def test_tests_ran_counts_tests_not_subtests(tests: dict[str, Any], ran: int | None) -> None:
    assert ran_count({**tests, "not_in_test_cases": 40}) == ran


def test_the_usual_count_is_the_median_of_the_releases_that_ran_tests() -> None:
    assert usual_tests((("3", 100), ("2", 0), ("1", 10), ("0", 90))) == (90, 3)
    assert usual_tests((("1", 0),)) is None
