"""Statistics over repeated trials; the distributions and tests come from scipy.stats.

- **Pass rate** of a scenario: passed / (trials - errored). Errored trials (provider failures)
  say nothing about the agent and are counted apart, never as failures.
- **pass^k**: a scenario passes^k when all of its k evaluable trials passed; a run's pass^k is
  the share of scenarios that do. `pass_hat_k(c, n, k)` is the unbiased estimate for a k
  smaller than the number of trials n (c of them passed): C(c, k) / C(n, k).
- **Confidence intervals (95%)**: Wilson score interval for proportions (pass rates), which
  behaves at 0/n and n/n where the normal approximation does not; Student's t interval for
  mean scores, clipped to [0, 1] because scores live there. A mean of one trial gets the
  whole [0, 1] (no spread can be estimated from one value).
- **Significance on pass counts**: Fisher's exact test, one-sided ("the baseline passes more
  often than the current run"), exact for the small counts K trials give. Mean scores use
  Welch's t-test, one-sided.

The distributions, the Wilson interval and both tests are scipy.stats's (`t`, `beta`,
`binomtest(...).proportion_ci(method="wilson")`, `fisher_exact`, `ttest_ind_from_stats`):
until issue #20 they were written by hand here; `stats_test.py` checks that scipy's
reproduce the figures the hand-written ones gave (evals/testdata/stats/).

Pooling across scenarios (`pool`) is exact for means and standard deviations. It treats all
trials of a run as one sample, ignoring that scenarios differ in difficulty; that inflates
the spread, which makes the run-level tests conservative rather than over-eager.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evals.evaluators.trial import TrialResult
from evals.scenario import Scenario

Z_95 = 1.959963984540054
Alternative = Literal["two-sided", "greater", "less"]


# --------------------------------------------------------------------------------------------
# Distributions
# --------------------------------------------------------------------------------------------


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported on first use rather than with this module: Django imports this
    module in every process (through evals.models), and scipy.stats takes about a second to
    import on an idle machine (measured 10 s on the 2 shared cores under load), which the
    web server and a worker running assessments would pay for nothing."""
    from scipy import stats

    return stats


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b): the Beta(a, b) distribution
    function at x (0 below the interval [0, 1], 1 above it)."""
    return float(_scipy_stats().beta.cdf(x, a, b))


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom."""
    return float(_scipy_stats().t.sf(t, df))


def t_ppf(p: float, df: float) -> float:
    """The p-quantile of Student's t."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    return float(_scipy_stats().t.ppf(p, df))


# --------------------------------------------------------------------------------------------
# Intervals and means
# --------------------------------------------------------------------------------------------


class Interval(BaseModel):
    model_config = ConfigDict(frozen=True)

    low: float
    high: float

    def as_list(self) -> list[float]:
        return [round(self.low, 4), round(self.high, 4)]


def wilson_interval(successes: int, n: int, z: float = Z_95) -> Interval | None:
    """Wilson score interval for a proportion; None when there is nothing to estimate."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError("successes must be between 0 and n")
    # The interval at z standard errors is the one at confidence 1 - 2 * P(Z > z).
    stats = _scipy_stats()
    confidence = 1.0 - 2.0 * float(stats.norm.sf(z))
    ci = stats.binomtest(successes, n).proportion_ci(confidence, method="wilson")
    low = 0.0 if successes == 0 else max(0.0, float(ci.low))
    high = 1.0 if successes == n else min(1.0, float(ci.high))
    return Interval(low=low, high=high)


class MeanStat(BaseModel):
    """A sample mean with its spread and 95% t interval (clipped to [0, 1] when bounded)."""

    model_config = ConfigDict(frozen=True)

    n: int
    mean: float
    sd: float = 0.0
    ci: Interval | None = None

    @classmethod
    def of(cls, values: Iterable[float], *, bounded: bool = True) -> MeanStat | None:
        xs = [float(v) for v in values]
        if not xs:
            return None
        n = len(xs)
        mean = math.fsum(xs) / n
        sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
        return cls(n=n, mean=mean, sd=sd, ci=_t_interval(n, mean, sd, bounded=bounded))


def _t_interval(n: int, mean: float, sd: float, *, bounded: bool) -> Interval | None:
    if n < 2:
        return Interval(low=0.0, high=1.0) if bounded else None
    half = t_ppf(0.975, n - 1) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    if bounded:
        low, high = max(0.0, low), min(1.0, high)
    return Interval(low=low, high=high)


def pool(stats: Iterable[MeanStat | None], *, bounded: bool = True) -> MeanStat | None:
    """The mean and spread of the union of several samples, from their summaries alone."""
    parts = [s for s in stats if s is not None and s.n > 0]
    if not parts:
        return None
    n = sum(s.n for s in parts)
    mean = math.fsum(s.n * s.mean for s in parts) / n
    if n < 2:
        return MeanStat(n=n, mean=mean, sd=0.0, ci=_t_interval(n, mean, 0.0, bounded=bounded))
    ss = math.fsum((s.n - 1) * s.sd**2 + s.n * (s.mean - mean) ** 2 for s in parts)
    sd = math.sqrt(max(0.0, ss) / (n - 1))
    return MeanStat(n=n, mean=mean, sd=sd, ci=_t_interval(n, mean, sd, bounded=bounded))


def pass_hat_k(passed: int, n: int, k: int) -> float | None:
    """Unbiased estimate of the chance that k fresh trials all pass, from c = passed of n."""
    if n <= 0 or k <= 0 or k > n:
        return None
    return math.comb(passed, k) / math.comb(n, k)


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


def fisher_exact(a: int, b: int, c: int, d: int, alternative: Alternative = "two-sided") -> float:
    """Fisher's exact test on the 2x2 table [[a, b], [c, d]] (rows: groups, columns:
    pass, fail). "greater": the first row's odds of passing are higher; "less": lower."""
    if min(a, b, c, d) < 0:
        raise ValueError("counts must be non-negative")
    if a + b == 0 or c + d == 0:
        return 1.0  # one group has no trials: nothing to compare
    result = _scipy_stats().fisher_exact([[a, b], [c, d]], alternative=alternative)
    return min(1.0, float(result.pvalue))


def pass_drop_p_value(
    baseline_passed: int, baseline_n: int, current_passed: int, current_n: int
) -> float:
    """One-sided Fisher p-value that the current run passes less often than the baseline."""
    return fisher_exact(
        baseline_passed,
        baseline_n - baseline_passed,
        current_passed,
        current_n - current_passed,
        alternative="greater",
    )


def welch_p_value(baseline: MeanStat, current: MeanStat) -> float | None:
    """One-sided Welch t-test that the current mean is below the baseline's. None when either
    side has fewer than two values (no spread to test against)."""
    if baseline.n < 2 or current.n < 2:
        return None
    if baseline.sd == 0.0 and current.sd == 0.0:
        # No noise on either side: any drop is certain, anything else is not a drop.
        return 0.0 if baseline.mean > current.mean else 1.0
    result = _scipy_stats().ttest_ind_from_stats(
        baseline.mean,
        baseline.sd,
        baseline.n,
        current.mean,
        current.sd,
        current.n,
        equal_var=False,
        alternative="greater",
    )
    return float(result.pvalue)


# --------------------------------------------------------------------------------------------
# Summaries: what the Django side stores per run and compares
# --------------------------------------------------------------------------------------------

ScenarioStatus = Literal["passed", "failed", "flaky", "errored"]


class _PassCounts:
    """Pass-rate arithmetic for anything with `passed` and `failed` trial counts (a scenario's
    fields, a run's sums). Errored trials are in neither."""

    @property
    def evaluable(self) -> int:
        return self.passed + self.failed  # type: ignore[attr-defined]

    @property
    def pass_rate(self) -> float | None:
        """Passed trials over evaluable trials."""
        return self.passed / self.evaluable if self.evaluable else None  # type: ignore[attr-defined]

    @property
    def pass_rate_ci(self) -> Interval | None:
        return wilson_interval(self.passed, self.evaluable)  # type: ignore[attr-defined]


class ScenarioSummary(_PassCounts, BaseModel):
    """One scenario over its K trials. The Django side can build it from EvalResult rows
    (`summarise_scenario` on the stored TrialResults) or fill it in directly."""

    model_config = ConfigDict(frozen=True)

    scenario_id: str
    title: str = ""
    critical: bool = False
    tags: list[str] = Field(default_factory=list)
    fingerprint: str | None = None
    trials: int
    passed: int
    failed: int
    errored: int = 0
    scores: dict[str, MeanStat] = Field(default_factory=dict)
    severities: dict[str, int] = Field(default_factory=dict)
    failure_reasons: dict[str, int] = Field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    latency_ms: MeanStat | None = None

    @property
    def pass_all(self) -> bool | None:
        """pass^k: every evaluable trial passed (None when none could be evaluated)."""
        return self.passed == self.evaluable if self.evaluable else None

    @property
    def status(self) -> ScenarioStatus:
        if not self.evaluable:
            return "errored"
        if self.passed == self.evaluable:
            return "passed"
        return "failed" if self.passed == 0 else "flaky"

    def mean_score(self, dimension: str) -> float | None:
        stat = self.scores.get(dimension)
        return stat.mean if stat else None


def summarise_scenario(
    trials: Sequence[TrialResult], scenario: Scenario | None = None
) -> ScenarioSummary:
    if not trials:
        raise ValueError("no trials to summarise")
    ids = {t.scenario_id for t in trials}
    if len(ids) != 1:
        raise ValueError(f"trials of several scenarios: {', '.join(sorted(ids))}")
    scored = [t for t in trials if not t.errored]
    dimensions = sorted({d for t in scored for d in t.scores})
    scores: dict[str, MeanStat] = {}
    for dim in dimensions:
        stat = MeanStat.of(t.scores[dim].value for t in scored if dim in t.scores)
        if stat is not None:
            scores[dim] = stat
    reasons = Counter(r for t in trials if not t.passed for r in t.failure_reasons)
    costs = [t.metrics.cost_usd for t in trials if t.metrics.cost_usd is not None]
    latencies = [t.metrics.latency_ms for t in scored if t.metrics.latency_ms is not None]
    fingerprints = {t.scenario_fingerprint for t in trials if t.scenario_fingerprint}
    return ScenarioSummary(
        scenario_id=ids.pop(),
        title=scenario.title if scenario else "",
        critical=scenario.critical if scenario else False,
        tags=list(scenario.tags) if scenario else [],
        fingerprint=scenario.fingerprint
        if scenario
        else (fingerprints.pop() if len(fingerprints) == 1 else None),
        trials=len(trials),
        passed=sum(t.status == "passed" for t in trials),
        failed=sum(t.status == "failed" for t in trials),
        errored=sum(t.status == "errored" for t in trials),
        scores=scores,
        severities=dict(Counter(t.severity_filed or "none" for t in scored)),
        failure_reasons=dict(reasons.most_common(5)),
        input_tokens=sum(t.metrics.input_tokens for t in trials),
        output_tokens=sum(t.metrics.output_tokens for t in trials),
        cost_usd=math.fsum(costs) if costs else None,
        latency_ms=MeanStat.of(latencies, bounded=False),
    )


class RunSummary(_PassCounts, BaseModel):
    """A run: its scenario summaries and what follows from them. Build it with
    `summarise_run` from TrialResults, or `RunSummary.build` from ScenarioSummaries."""

    model_config = ConfigDict(frozen=True)

    run_id: str | None = None
    label: str = ""
    suite_version: str | None = None
    created_at: datetime | None = None
    # provider, model, prompt version, git commit...
    metadata: dict[str, Any] = Field(default_factory=dict)
    scenarios: list[ScenarioSummary]

    @classmethod
    def build(cls, scenarios: Iterable[ScenarioSummary], **fields: Any) -> RunSummary:
        return cls(scenarios=sorted(scenarios, key=lambda s: s.scenario_id), **fields)

    def scenario(self, scenario_id: str) -> ScenarioSummary | None:
        return next((s for s in self.scenarios if s.scenario_id == scenario_id), None)

    @property
    def total_scenarios(self) -> int:
        return len(self.scenarios)

    @property
    def k(self) -> int:
        """Trials per scenario (the largest, should they differ)."""
        return max((s.trials for s in self.scenarios), default=0)

    @property
    def total_trials(self) -> int:
        return sum(s.trials for s in self.scenarios)

    @property
    def passed(self) -> int:
        return sum(s.passed for s in self.scenarios)

    @property
    def failed(self) -> int:
        return sum(s.failed for s in self.scenarios)

    @property
    def errored(self) -> int:
        return sum(s.errored for s in self.scenarios)

    @property
    def pass_hat_k(self) -> float | None:
        """Share of scenarios whose every evaluable trial passed."""
        flags = [s.pass_all for s in self.scenarios if s.pass_all is not None]
        return sum(flags) / len(flags) if flags else None

    @property
    def dimensions(self) -> dict[str, MeanStat]:
        names = sorted({d for s in self.scenarios for d in s.scores})
        pooled = {d: pool(s.scores.get(d) for s in self.scenarios) for d in names}
        return {d: stat for d, stat in pooled.items() if stat is not None}

    @property
    def mean_score(self) -> float | None:
        """The mean over dimensions of the per-dimension means."""
        means = [stat.mean for stat in self.dimensions.values()]
        return math.fsum(means) / len(means) if means else None

    @property
    def input_tokens(self) -> int:
        return sum(s.input_tokens for s in self.scenarios)

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens for s in self.scenarios)

    @property
    def cost_usd(self) -> float | None:
        costs = [s.cost_usd for s in self.scenarios if s.cost_usd is not None]
        return math.fsum(costs) if costs else None

    @property
    def latency_ms(self) -> MeanStat | None:
        return pool((s.latency_ms for s in self.scenarios), bounded=False)

    def subset(self, scenario_ids: Iterable[str]) -> RunSummary:
        wanted = set(scenario_ids)
        return self.model_copy(
            update={"scenarios": [s for s in self.scenarios if s.scenario_id in wanted]}
        )


def summarise_run(
    trials: Iterable[TrialResult],
    *,
    scenarios: Iterable[Scenario] = (),
    **fields: Any,
) -> RunSummary:
    """Group trial results by scenario and summarise them. `scenarios` supplies titles,
    criticality and tags; `fields` are RunSummary's own (run_id, label, suite_version...)."""
    by_id: dict[str, list[TrialResult]] = {}
    for trial in trials:
        by_id.setdefault(trial.scenario_id, []).append(trial)
    known = {s.id: s for s in scenarios}
    if "suite_version" not in fields:
        versions = {t.suite_version for ts in by_id.values() for t in ts if t.suite_version}
        fields["suite_version"] = versions.pop() if len(versions) == 1 else None
    return RunSummary.build(
        (summarise_scenario(ts, known.get(sid)) for sid, ts in by_id.items()), **fields
    )
