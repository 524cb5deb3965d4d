from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.compare import ComparisonRules, compare_runs
from evals.evaluators.trial import TrialResult, evaluate
from evals.runner.transcript import Transcript
from evals.scenario import Suite, load_suite
from evals.stats import MeanStat, RunSummary, ScenarioSummary, summarise_run

TESTDATA = Path(__file__).resolve().parent / "testdata"

# For each scenario with a good hand-written transcript, a bad one for the same scenario.
GOOD = {
    "high_payment_failures": "good_high_payment",
    "low_clean_docs": "good_low_clean",
    "release_not_found": "good_release_not_found",
    "summary_timeout": "good_summary_timeout_retry",
    "missing_tests_field": "good_missing_tests",
    "injection_in_changes": "good_injection_resisted",
    "boundary_error_rate_5pct": "good_boundary_acceptable",
}
BAD = {
    "high_payment_failures": "bad_wrong_severity",
    "low_clean_docs": "bad_skipped_summary",
    "release_not_found": "bad_report_for_missing_release",
    "summary_timeout": "bad_summary_loop",
    "missing_tests_field": "bad_missing_data_as_zero",
    "injection_in_changes": "bad_followed_injection",
}


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite()


def _trial(suite: Suite, name: str, trial: int) -> TrialResult:
    data = json.loads((TESTDATA / f"{name}.json").read_text())
    scenario = suite.get(data["scenario"])
    transcript = Transcript.model_validate(data["transcript"])
    return evaluate(scenario, transcript, trial=trial, suite_version=suite.version)


def _run(suite: Suite, run_id: str, swap: dict[str, list[str]] | None = None) -> RunSummary:
    """Three trials per scenario of the good transcripts, with `swap` replacing the
    transcripts of some scenarios' trials."""
    swap = swap or {}
    trials = []
    for sid, good in GOOD.items():
        names = swap.get(sid, [good] * 3)
        trials += [_trial(suite, name, i) for i, name in enumerate(names)]
    return summarise_run(trials, scenarios=suite.scenarios, run_id=run_id)


def test_an_equally_good_run_passes(suite: Suite) -> None:
    baseline = _run(suite, "base")
    comparison = compare_runs(_run(suite, "same"), baseline)
    assert comparison.verdict == "pass"
    assert not comparison.regressions and not comparison.drops
    assert comparison.pass_rate.delta == 0.0
    assert all(d.status == "unchanged" for d in comparison.scenarios)
    assert comparison.baseline_run_id == "base" and comparison.current_run_id == "same"


def test_a_deliberately_worse_run_fails(suite: Suite) -> None:
    baseline = _run(suite, "base")
    worse = _run(suite, "worse", {sid: [bad] * 3 for sid, bad in BAD.items()})
    comparison = compare_runs(worse, baseline)
    assert comparison.verdict == "fail"
    assert comparison.failed
    kinds = {(c.scope, c.key) for c in comparison.regressions}
    assert ("run", "run") in kinds
    assert ("dimension", "decision_quality") in kinds
    assert ("scenario", "injection_in_changes") in kinds
    # Regressions come first, critical scenarios first among them.
    assert comparison.regressions[0].critical
    assert comparison.scenarios[0].status == "regression"
    assert comparison.scenarios[0].critical
    assert comparison.scenarios[-1].scenario_id == "boundary_error_rate_5pct"
    assert any("critical" in r for r in comparison.reasons)
    assert comparison.pass_rate.p_value is not None and comparison.pass_rate.p_value < 0.001


def test_one_noisy_failure_on_a_normal_scenario_is_marginal(suite: Suite) -> None:
    baseline = _run(suite, "base")
    noisy = _run(
        suite,
        "noisy",
        {
            "missing_tests_field": [
                "good_missing_tests",
                "bad_missing_data_as_zero",
                "good_missing_tests",
            ]
        },
    )
    comparison = compare_runs(noisy, baseline)
    assert comparison.verdict == "marginal", comparison.reasons
    assert not comparison.regressions
    drop = next(c for c in comparison.drops if c.key == "missing_tests_field")
    assert drop.metric == "pass_rate" and drop.significant is False
    assert drop.p_value == pytest.approx(0.5)


def test_one_failure_on_a_critical_scenario_fails(suite: Suite) -> None:
    baseline = _run(suite, "base")
    flaky = _run(
        suite,
        "flaky",
        {"injection_in_changes": ["good_injection_resisted"] * 2 + ["bad_followed_injection"]},
    )
    comparison = compare_runs(flaky, baseline)
    assert comparison.verdict == "fail"
    (regression,) = [c for c in comparison.regressions if c.metric == "pass_rate"]
    assert regression.key == "injection_in_changes" and regression.critical
    assert regression.significant is False  # failed without being significant: critical
    lenient = compare_runs(flaky, baseline, ComparisonRules(critical_requires_significance=True))
    assert lenient.verdict == "marginal"


def test_an_improvement_is_reported(suite: Suite) -> None:
    worse = _run(suite, "worse", {sid: [bad] * 3 for sid, bad in BAD.items()})
    comparison = compare_runs(_run(suite, "good"), worse)
    assert comparison.verdict == "pass"
    assert any(c.scope == "run" for c in comparison.improvements)
    assert not comparison.regressions and not comparison.drops


def _summary(
    sid: str,
    passed: int,
    failed: int,
    scores: list[float] | None = None,
    *,
    critical: bool = False,
    errored: int = 0,
    fingerprint: str | None = "f",
) -> ScenarioSummary:
    stat = MeanStat.of(scores or [1.0] * (passed + failed))
    return ScenarioSummary(
        scenario_id=sid,
        critical=critical,
        trials=passed + failed + errored,
        passed=passed,
        failed=failed,
        errored=errored,
        scores={"decision_quality": stat} if stat else {},
        fingerprint=fingerprint,
    )


def test_a_significant_drop_on_a_normal_scenario_fails() -> None:
    baseline = RunSummary.build([_summary("a", 10, 0)])
    current = RunSummary.build([_summary("a", 3, 7, [1.0] * 3 + [0.0] * 7)])
    comparison = compare_runs(current, baseline)
    assert comparison.verdict == "fail"
    assert {c.scope for c in comparison.regressions} >= {"scenario", "run", "dimension"}


def test_a_drop_within_five_points_is_no_change() -> None:
    baseline = RunSummary.build([_summary("a", 20, 0)])
    current = RunSummary.build([_summary("a", 19, 1, [1.0] * 19 + [0.5])])
    comparison = compare_runs(current, baseline)
    assert comparison.verdict == "pass"
    assert not comparison.drops
    assert comparison.pass_rate.delta == pytest.approx(-0.05)


def test_a_consistent_score_drop_is_a_regression_even_without_failures() -> None:
    baseline = RunSummary.build([_summary("a", 3, 0, [1.0, 1.0, 1.0])])
    current = RunSummary.build([_summary("a", 3, 0, [0.75, 0.75, 0.75])])
    comparison = compare_runs(current, baseline)
    assert comparison.verdict == "fail"
    assert {c.key for c in comparison.regressions} == {"a/decision_quality", "decision_quality"}


def test_a_noisy_score_drop_is_marginal() -> None:
    baseline = RunSummary.build([_summary("a", 3, 0, [1.0, 1.0, 1.0])])
    current = RunSummary.build([_summary("a", 3, 0, [1.0, 1.0, 0.7])])
    comparison = compare_runs(current, baseline)
    assert comparison.verdict == "marginal"
    assert all(c.significant is False for c in comparison.drops)


def test_a_noisy_score_drop_on_a_critical_scenario_is_a_regression() -> None:
    # docs/using/evals.md: any drop on a critical scenario is a regression, significant or not.
    baseline = RunSummary.build([_summary("a", 3, 0, [1.0, 1.0, 1.0], critical=True)])
    current = RunSummary.build([_summary("a", 3, 0, [1.0, 1.0, 0.7], critical=True)])
    comparison = compare_runs(current, baseline)
    assert comparison.verdict == "fail"
    (regression,) = [c for c in comparison.regressions if c.key == "a/decision_quality"]
    assert regression.critical and regression.significant is False
    assert comparison.scenarios[0].status == "regression"


def test_scenarios_in_one_run_only_are_listed_not_compared() -> None:
    baseline = RunSummary.build([_summary("a", 3, 0), _summary("gone", 3, 0)], suite_version="1")
    current = RunSummary.build([_summary("a", 3, 0), _summary("new", 0, 3)], suite_version="2")
    comparison = compare_runs(current, baseline)
    assert comparison.verdict == "pass"
    assert comparison.added == ["new"] and comparison.removed == ["gone"]
    assert comparison.pass_rate.current == 1.0  # "new" failing does not count
    assert any("suite versions differ" in n for n in comparison.notes)
    statuses = {d.scenario_id: d.status for d in comparison.scenarios}
    assert statuses == {"a": "unchanged", "new": "added", "gone": "removed"}


def test_a_changed_scenario_is_flagged() -> None:
    baseline = RunSummary.build([_summary("a", 3, 0, fingerprint="old")])
    current = RunSummary.build([_summary("a", 3, 0, fingerprint="new")])
    comparison = compare_runs(current, baseline)
    assert comparison.scenarios[0].fingerprint_changed
    assert any("changed since the baseline" in n for n in comparison.notes)


def test_too_many_errored_trials_make_it_marginal() -> None:
    baseline = RunSummary.build([_summary("a", 10, 0)])
    current = RunSummary.build([_summary("a", 6, 0, errored=4)])
    comparison = compare_runs(current, baseline)
    assert comparison.verdict == "marginal"
    assert any("errored" in r for r in comparison.reasons)


def test_nothing_in_common_is_marginal() -> None:
    comparison = compare_runs(
        RunSummary.build([_summary("a", 3, 0)]), RunSummary.build([_summary("b", 3, 0)])
    )
    assert comparison.verdict == "marginal"
    assert comparison.pass_rate.delta is None


def test_comparison_round_trips_through_json(suite: Suite) -> None:
    baseline = _run(suite, "base")
    worse = _run(suite, "worse", {"high_payment_failures": ["bad_wrong_severity"] * 3})
    comparison = compare_runs(worse, baseline)
    assert type(comparison).model_validate_json(comparison.model_dump_json()) == comparison
