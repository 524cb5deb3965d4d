from __future__ import annotations

from evals.compare import compare_runs
from evals.stats import MeanStat, RunSummary, ScenarioSummary
from evals.verdict_words import headline, moved


def _summary(
    sid: str,
    passed: int,
    failed: int,
    scores: list[float] | None = None,
    *,
    critical: bool = False,
    errored: int = 0,
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
        fingerprint="f",
    )


def test_a_critical_scenario_that_errored_is_a_regression_said_in_words() -> None:
    baseline = RunSummary.build(
        [_summary("summary_http_500", 1, 0, critical=True), _summary("low_clean_docs", 1, 0)]
    )
    current = RunSummary.build(
        [
            _summary("summary_http_500", 0, 0, critical=True, errored=1),
            _summary("low_clean_docs", 1, 0),
        ]
    )
    comparison = compare_runs(current, baseline)
    assert comparison.verdict == "fail"
    errored = next(d for d in comparison.scenarios if d.scenario_id == "summary_http_500")
    assert errored.status == "errored"
    assert headline(comparison) == (
        "Fails: 1 critical scenario regressed: summary_http_500 passed 1 of 1 before, errored now"
    )


def test_an_errored_scenario_that_is_not_critical_is_errored_and_marginal() -> None:
    baseline = RunSummary.build([_summary("a", 3, 0), _summary("b", 3, 0)])
    current = RunSummary.build([_summary("a", 0, 0, errored=3), _summary("b", 3, 0)])
    comparison = compare_runs(current, baseline)
    assert [d.status for d in comparison.scenarios if d.scenario_id == "a"] == ["errored"]
    assert comparison.verdict == "marginal"
    assert "1 scenario errored in every trial, so not measured: a" in headline(comparison)


def test_regressions_are_counted_per_scenario_with_their_dimensions_under_them() -> None:
    # One critical scenario whose pass rate and decision-quality score both fell: two
    # regressed figures, one regressed scenario.
    baseline = RunSummary.build([_summary("pay", 1, 0, [1.0], critical=True), _summary("x", 1, 0)])
    current = RunSummary.build([_summary("pay", 0, 1, [0.0], critical=True), _summary("x", 1, 0)])
    comparison = compare_runs(current, baseline)
    assert len([c for c in comparison.regressions if c.key.startswith("pay")]) == 2
    assert [d.scenario_id for d in comparison.regressed_scenarios] == ["pay"]
    assert headline(comparison) == (
        "Fails: 1 critical scenario regressed: pay passed 1 of 1 before, 0 of 1 now"
    )
    [words] = moved(comparison)
    assert words.sentence == "passed 1 of 1 before, 0 of 1 now"
    assert words.dimensions == ["decision quality 1.00 \u2192 0.00"]


def test_a_pass_and_a_marginal_drop_in_words() -> None:
    same = RunSummary.build([_summary("a", 3, 0), _summary("b", 3, 0)])
    assert headline(compare_runs(same, same)) == (
        "Passes: no scenario dropped by more than 5 points (2 scenarios compared)"
    )
    worse = RunSummary.build([_summary("a", 2, 1, [1.0, 1.0, 1.0]), _summary("b", 3, 0)])
    comparison = compare_runs(worse, same)
    assert comparison.verdict == "marginal"
    assert headline(comparison) == (
        "Marginal: 1 scenario dropped by more than 5 points, possibly noise: "
        "a passed 3 of 3 before, 2 of 3 now"
    )


def test_no_figure_mixes_units_or_carries_a_p_value() -> None:
    baseline = RunSummary.build([_summary(f"s{i}", 3, 0) for i in range(5)])
    current = RunSummary.build(
        [_summary(f"s{i}", 0, 3, [0.0, 0.0, 0.0], critical=True) for i in range(5)]
    )
    text = headline(compare_runs(current, baseline))
    assert text.startswith("Fails: 5 critical scenarios regressed: s0 passed 3 of 3 before")
    assert text.endswith("and 2 more")
    assert "%" not in text and "pts" not in text and "p=" not in text
