from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evals.evaluators.score import Score
from evals.evaluators.trial import TrialResult
from evals.runner.transcript import RunError, TrialMetrics
from evals.scenario import load_suite
from evals.stats import (
    MeanStat,
    betainc,
    fisher_exact,
    pass_drop_p_value,
    pass_hat_k,
    pool,
    summarise_run,
    summarise_scenario,
    t_ppf,
    t_sf,
    welch_p_value,
    wilson_interval,
)


@pytest.mark.parametrize(
    ("df", "quantile"),
    [(1, 12.706205), (2, 4.302653), (5, 2.570582), (10, 2.228139), (30, 2.042272)],
)
def test_t_quantiles_match_the_tables(df: int, quantile: float) -> None:
    assert t_ppf(0.975, df) == pytest.approx(quantile, abs=1e-6)
    assert t_ppf(0.025, df) == pytest.approx(-quantile, abs=1e-6)


def test_t_tail_and_incomplete_beta() -> None:
    assert t_sf(2.0, 5) == pytest.approx(0.050970, abs=1e-6)
    assert t_sf(0.0, 3) == pytest.approx(0.5)
    assert t_sf(-2.0, 5) == pytest.approx(1 - 0.050970, abs=1e-6)
    assert betainc(2, 3, 0.4) == pytest.approx(0.5248)
    assert betainc(2.5, 1.5, 0.3) + betainc(1.5, 2.5, 0.7) == pytest.approx(1.0)
    # Large df tends to the normal distribution.
    assert t_ppf(0.975, 100_000) == pytest.approx(1.959964, abs=1e-4)


def test_wilson_interval() -> None:
    ci = wilson_interval(8, 10)
    assert ci is not None
    assert (ci.low, ci.high) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    all_pass = wilson_interval(3, 3)
    assert (
        all_pass is not None
        and all_pass.high == 1.0
        and all_pass.low == pytest.approx(0.4385, abs=1e-4)
    )
    none_pass = wilson_interval(0, 3)
    assert none_pass is not None and none_pass.low == 0.0
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(4, 3)


def test_fisher_exact_matches_reference_values() -> None:
    # Two-sided and "greater": the reference values scipy.stats.fisher_exact gives.
    assert fisher_exact(8, 2, 1, 5) == pytest.approx(0.034965, abs=1e-6)
    assert fisher_exact(8, 2, 1, 5, "greater") == pytest.approx(0.024476, abs=1e-6)
    # "less": everything but the most extreme table, 1 - C(10, 9) * C(6, 0) / C(16, 9).
    assert fisher_exact(8, 2, 1, 5, "less") == pytest.approx(1 - 10 / math.comb(16, 9))
    assert fisher_exact(3, 0, 0, 3, "greater") == pytest.approx(0.05)
    assert fisher_exact(0, 0, 0, 0) == 1.0
    assert fisher_exact(10, 10, 10, 10) == pytest.approx(1.0)


def test_pass_count_drops_need_enough_trials_to_be_significant() -> None:
    assert pass_drop_p_value(3, 3, 2, 3) == pytest.approx(0.5)
    assert pass_drop_p_value(3, 3, 0, 3) == pytest.approx(0.05)  # not < 0.05 at K = 3
    assert pass_drop_p_value(5, 5, 1, 5) < 0.05
    assert pass_drop_p_value(60, 66, 30, 66) < 1e-6
    assert pass_drop_p_value(2, 3, 3, 3) == pytest.approx(1.0)


def test_pass_hat_k() -> None:
    assert pass_hat_k(3, 3, 3) == 1.0
    assert pass_hat_k(2, 3, 3) == 0.0
    assert pass_hat_k(4, 5, 2) == pytest.approx(math.comb(4, 2) / math.comb(5, 2))
    assert pass_hat_k(1, 3, 4) is None


def test_mean_stat_and_pooling() -> None:
    a = MeanStat.of([1.0, 0.5, 0.75])
    b = MeanStat.of([0.25, 1.0])
    both = MeanStat.of([1.0, 0.5, 0.75, 0.25, 1.0])
    assert a is not None and b is not None and both is not None
    pooled = pool([a, b, None])
    assert pooled is not None
    assert pooled.n == 5
    assert pooled.mean == pytest.approx(both.mean)
    assert pooled.sd == pytest.approx(both.sd)
    assert a.ci is not None and 0.0 <= a.ci.low <= a.mean <= a.ci.high <= 1.0
    one = MeanStat.of([0.4])
    assert one is not None and one.ci is not None and (one.ci.low, one.ci.high) == (0.0, 1.0)
    assert MeanStat.of([]) is None
    unbounded = MeanStat.of([1000.0, 3000.0], bounded=False)
    assert unbounded is not None and unbounded.ci is not None and unbounded.ci.high > 3000


def test_welch_p_value() -> None:
    x = MeanStat.of([2.0, 3.0, 4.0, 5.0, 6.0], bounded=False)
    y = MeanStat.of([1.0, 2.0, 3.0, 4.0, 5.0], bounded=False)
    assert x is not None and y is not None
    # scipy: ttest_ind(x, y, equal_var=False) -> t = 1.0, df = 8, two-sided p = 0.3466.
    assert welch_p_value(x, y) == pytest.approx(0.3466 / 2, abs=1e-4)
    flat_hi, flat_lo = MeanStat.of([1.0, 1.0, 1.0]), MeanStat.of([0.75, 0.75, 0.75])
    assert flat_hi is not None and flat_lo is not None
    assert welch_p_value(flat_hi, flat_lo) == 0.0  # a consistent drop, no noise
    assert welch_p_value(flat_lo, flat_hi) == 1.0
    single = MeanStat.of([1.0])
    assert single is not None and welch_p_value(single, flat_lo) is None


def _trial(
    sid: str,
    status: str,
    values: dict[str, float] | None = None,
    *,
    reasons: list[str] | None = None,
    severity: str | None = None,
    tokens: int = 100,
    cost: float | None = 0.01,
    latency: float = 1000.0,
) -> TrialResult:
    scores = {
        dim: Score(dimension=dim, value=v, passed=v == 1.0) for dim, v in (values or {}).items()
    }
    return TrialResult(
        scenario_id=sid,
        status=status,  # type: ignore[arg-type]
        scores=scores if status != "errored" else {},
        failure_reasons=reasons or [],
        error=RunError(error_type="ServerError") if status == "errored" else None,
        severity_filed=severity,
        metrics=TrialMetrics(
            input_tokens=tokens, output_tokens=tokens // 10, cost_usd=cost, latency_ms=latency
        ),
        suite_version="1.0.0",
    )


def test_errored_trials_are_counted_apart() -> None:
    trials = [
        _trial("s", "passed", {"tool_usage": 1.0}, severity="high"),
        _trial("s", "failed", {"tool_usage": 0.5}, reasons=["tool_usage: x"], severity="low"),
        _trial("s", "errored", latency=99_999),
    ]
    summary = summarise_scenario(trials)
    assert (summary.trials, summary.passed, summary.failed, summary.errored) == (3, 1, 1, 1)
    assert summary.pass_rate == 0.5
    assert summary.status == "flaky"
    assert summary.pass_all is False
    assert summary.scores["tool_usage"].mean == 0.75
    assert summary.scores["tool_usage"].n == 2
    assert summary.severities == {"high": 1, "low": 1}
    assert summary.failure_reasons == {"tool_usage: x": 1}
    assert summary.input_tokens == 300  # errored trials still cost tokens
    assert summary.cost_usd == pytest.approx(0.03)
    assert summary.latency_ms is not None and summary.latency_ms.mean == 1000.0


def test_scenario_status() -> None:
    assert summarise_scenario([_trial("s", "passed")] * 3).status == "passed"
    assert summarise_scenario([_trial("s", "failed")] * 3).status == "failed"
    only_errors = summarise_scenario([_trial("s", "errored")] * 2)
    assert only_errors.status == "errored"
    assert only_errors.pass_rate is None and only_errors.pass_all is None
    with pytest.raises(ValueError):
        summarise_scenario([_trial("a", "passed"), _trial("b", "passed")])


def test_run_summary_pools_the_scenarios() -> None:
    suite = load_suite(pattern="high_payment_failures,low_clean_docs")
    trials = [
        *(_trial("high_payment_failures", "passed", {"tool_usage": 1.0}) for _ in range(3)),
        _trial("low_clean_docs", "passed", {"tool_usage": 1.0}),
        _trial("low_clean_docs", "failed", {"tool_usage": 0.5}),
        _trial("low_clean_docs", "errored", cost=None),
    ]
    run = summarise_run(trials, scenarios=suite.scenarios, run_id="r1", label="nightly")
    assert run.run_id == "r1" and run.suite_version == "1.0.0"
    assert [s.scenario_id for s in run.scenarios] == ["high_payment_failures", "low_clean_docs"]
    high = run.scenario("high_payment_failures")
    assert high is not None and high.critical and high.title and high.fingerprint
    assert (run.total_scenarios, run.total_trials, run.k) == (2, 6, 3)
    assert (run.passed, run.failed, run.errored) == (4, 1, 1)
    assert run.pass_rate == pytest.approx(0.8)
    assert run.pass_rate_ci is not None
    assert run.pass_hat_k == 0.5
    assert run.dimensions["tool_usage"].mean == pytest.approx(0.9)
    assert run.dimensions["tool_usage"].n == 5
    assert run.cost_usd == pytest.approx(0.05)
    assert run.input_tokens == 600
    assert run.mean_score == pytest.approx(0.9)
    again = type(run).model_validate_json(run.model_dump_json())
    assert again == run


# --------------------------------------------------------------------------------------------
# The move to scipy.stats (issue #20): the figures the hand-written functions gave, recorded
# on a table of inputs before the move (evals/testdata/stats/record_figures.py), reproduced.
# The hand-written code converged to ~1e-11 (bisection for t_ppf, a continued fraction for
# betainc); measured, the largest relative difference is 5.4e-11 (t_ppf at df = 1).
# --------------------------------------------------------------------------------------------

BEFORE = json.loads(
    (Path(__file__).parent / "testdata/stats/figures_before_scipy.json").read_text()
)
REL, ABS = 1e-9, 1e-12


def _same(value: float | None, before: float | None) -> bool:
    if before is None or value is None:
        return value is before
    return value == pytest.approx(before, rel=REL, abs=ABS)


def test_the_recording_covers_every_function() -> None:
    sizes = {name: len(rows) for name, rows in BEFORE.items() if name != "recorded_from"}
    assert sizes == {
        "betainc": 56,
        "t_sf": 72,
        "t_ppf": 54,
        "wilson": 35,
        "fisher": 14,
        "means": 20,
        "welch": 9,
    }


@pytest.mark.parametrize("row", BEFORE["betainc"], ids=lambda r: f"I{r['x']}({r['a']},{r['b']})")
def test_betainc_as_before(row: dict) -> None:
    assert _same(betainc(row["a"], row["b"], row["x"]), row["value"])


@pytest.mark.parametrize("row", BEFORE["t_sf"], ids=lambda r: f"t={r['t']},df={r['df']}")
def test_t_sf_as_before(row: dict) -> None:
    assert _same(t_sf(row["t"], row["df"]), row["value"])


@pytest.mark.parametrize("row", BEFORE["t_ppf"], ids=lambda r: f"p={r['p']},df={r['df']}")
def test_t_ppf_as_before(row: dict) -> None:
    assert _same(t_ppf(row["p"], row["df"]), row["value"])


@pytest.mark.parametrize("row", BEFORE["wilson"], ids=lambda r: f"{r['successes']}/{r['n']}")
def test_wilson_interval_as_before(row: dict) -> None:
    ci = wilson_interval(row["successes"], row["n"])
    if row["interval"] is None:
        assert ci is None
        return
    assert ci is not None
    assert _same(ci.low, row["interval"][0]) and _same(ci.high, row["interval"][1])


@pytest.mark.parametrize("row", BEFORE["fisher"], ids=lambda r: "-".join(map(str, r["table"])))
def test_fisher_exact_as_before(row: dict) -> None:
    a, b, c, d = row["table"]
    for alternative in ("two-sided", "greater", "less"):
        assert _same(fisher_exact(a, b, c, d, alternative), row[alternative]), alternative
    assert _same(pass_drop_p_value(a, a + b, c, c + d), row["pass_drop"])


@pytest.mark.parametrize("name", sorted(BEFORE["means"]))
def test_mean_stat_as_before(name: str) -> None:
    row = BEFORE["means"][name]
    stat = MeanStat.of(row["values"], bounded=row["bounded"])
    assert stat is not None
    assert _same(stat.mean, row["mean"]) and _same(stat.sd, row["sd"])
    if row["ci"] is None:
        assert stat.ci is None
    else:
        assert stat.ci is not None
        assert _same(stat.ci.low, row["ci"][0]) and _same(stat.ci.high, row["ci"][1])


@pytest.mark.parametrize("row", BEFORE["welch"], ids=lambda r: f"{r['baseline']}-{r['current']}")
def test_welch_p_value_as_before(row: dict) -> None:
    baseline = MeanStat.of(BEFORE["means"][f"{row['baseline']}/unbounded"]["values"], bounded=False)
    current = MeanStat.of(BEFORE["means"][f"{row['current']}/unbounded"]["values"], bounded=False)
    assert baseline is not None and current is not None
    assert _same(welch_p_value(baseline, current), row["p"])
