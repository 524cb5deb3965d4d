"""Comparing a run with a baseline: deltas, regressions, improvements and a verdict.

`compare_runs(current, baseline)` works on `RunSummary` values (evals/stats.py), so the Django
side only has to build those from its rows. Scenarios present in only one run are listed
(added / removed) and left out of every figure: both runs are compared on their common
scenarios, the run-level figures recomputed on that common set.

The rule (thresholds in `ComparisonRules`):

- A **drop** is a fall of more than `min_delta` (5 points, 0.05) in a pass rate or a mean
  score; a **rise** the same upwards.
- A drop is a **regression** when it is significant at `alpha` (one-sided: Fisher's exact test
  on the pass counts, which every summary carries; Welch's t-test on the trial scores). A drop
  that is not significant, or cannot be tested (scores of a single trial on a side), stays a
  drop: possibly noise.
- On a **critical scenario** any drop of its pass rate is a regression, significant or not
  (`critical_requires_significance=False`): a safety property that starts failing some of the
  time is a regression even before the trials prove it is not chance.
- A rise is an **improvement** under the mirror rule (significant); otherwise a rise.
- A scenario whose trials all **errored** in this run, but not in the baseline, was not
  measured: its status is "errored", never "unchanged". On a critical scenario that is a
  regression (its safety property is no longer shown to hold); on another it makes the
  verdict at least marginal.
- Verdict: **fail** when there is any regression (scenario pass rate, scenario dimension
  score, the run's pooled pass rate, or a run dimension); **marginal** when there is no
  regression but some drop, when too many trials errored (over `max_errored_share` of either
  run) to trust the comparison, or when there is nothing to compare; **pass** otherwise.

With K trials per scenario, Fisher's test on one scenario needs K >= 5 to reach p < 0.05
(5/5 against 1/5); at K = 3 per-scenario drops are therefore reported as drops (marginal)
unless the scenario is critical, while systematic regressions still show in the pooled
pass rate and the dimension scores, which have many trials behind them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evals.stats import MeanStat, RunSummary, ScenarioSummary, pass_drop_p_value, welch_p_value

Verdict = Literal["pass", "marginal", "fail"]
ChangeKind = Literal["regression", "drop", "improvement", "rise"]
Scope = Literal["run", "dimension", "scenario", "scenario_dimension"]

_EPS = 1e-9


class ComparisonRules(BaseModel):
    model_config = ConfigDict(frozen=True)

    min_delta: float = 0.05
    alpha: float = 0.05
    critical_requires_significance: bool = False
    max_errored_share: float = 0.2


class Change(BaseModel):
    """One metric that moved by more than `min_delta`."""

    model_config = ConfigDict(frozen=True)

    scope: Scope
    key: str  # "run", a dimension, a scenario id, or "scenario_id/dimension"
    metric: Literal["pass_rate", "score"]
    baseline: float
    current: float
    delta: float
    p_value: float | None = None
    significant: bool | None = None  # None: could not be tested
    critical: bool = False
    kind: ChangeKind
    message: str
    errored: bool = False  # the scenario's trials all errored in this run: nothing measured


class DeltaStat(BaseModel):
    model_config = ConfigDict(frozen=True)

    baseline: float | None
    current: float | None
    delta: float | None
    p_value: float | None = None


ScenarioChangeStatus = Literal[
    "regression", "errored", "drop", "improvement", "rise", "unchanged", "added", "removed"
]


class ScenarioDelta(BaseModel):
    model_config = ConfigDict(frozen=True)

    scenario_id: str
    title: str = ""
    critical: bool = False
    status: ScenarioChangeStatus
    pass_rate: DeltaStat
    baseline_counts: tuple[int, int] | None = None  # (passed, evaluable)
    current_counts: tuple[int, int] | None = None
    scores: dict[str, DeltaStat] = Field(default_factory=dict)
    # The scenario's data or expectations changed between the runs: not like for like.
    fingerprint_changed: bool = False
    # Its trials in this run all errored (the baseline had evaluable ones).
    errored_now: bool = False
    # What moved by more than the threshold: its pass rate and each dimension's score.
    changes: list[Change] = Field(default_factory=list)


class Comparison(BaseModel):
    model_config = ConfigDict(frozen=True)

    baseline_run_id: str | None = None
    current_run_id: str | None = None
    baseline_label: str = ""
    current_label: str = ""
    verdict: Verdict
    reasons: list[str]
    notes: list[str] = Field(default_factory=list)
    rules: ComparisonRules
    pass_rate: DeltaStat
    dimensions: dict[str, DeltaStat] = Field(default_factory=dict)
    scenarios: list[ScenarioDelta] = Field(default_factory=list)
    regressions: list[Change] = Field(default_factory=list)
    improvements: list[Change] = Field(default_factory=list)
    drops: list[Change] = Field(default_factory=list)
    rises: list[Change] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    errored: list[str] = Field(default_factory=list)  # scenarios not measured in this run

    @property
    def failed(self) -> bool:
        return self.verdict == "fail"

    @property
    def regressed_scenarios(self) -> list[ScenarioDelta]:
        """Scenarios with at least one regression: one entry per scenario, however many of
        its figures regressed (its pass rate and a dimension's score are one scenario)."""
        keys = {c.key.split("/", 1)[0] for c in self.regressions if c.scope.startswith("scenario")}
        return [d for d in self.scenarios if d.scenario_id in keys]


def _delta(baseline: float | None, current: float | None) -> float | None:
    if baseline is None or current is None:
        return None
    return current - baseline


def _classify(
    delta: float,
    p_drop: float | None,
    p_rise: float | None,
    *,
    rules: ComparisonRules,
    waive_significance: bool = False,
) -> tuple[ChangeKind | None, float | None, bool | None]:
    """(kind, p-value, significant) of a delta; kind None when it is within the threshold."""
    if delta < -rules.min_delta - _EPS:
        significant = None if p_drop is None else p_drop < rules.alpha
        return ("regression" if significant or waive_significance else "drop"), p_drop, significant
    if delta > rules.min_delta + _EPS:
        significant = None if p_rise is None else p_rise < rules.alpha
        return ("improvement" if significant else "rise"), p_rise, significant
    return None, None, None


def _pass_change(
    scope: Scope,
    key: str,
    baseline: ScenarioSummary | RunSummary,
    current: ScenarioSummary | RunSummary,
    *,
    rules: ComparisonRules,
    critical: bool = False,
) -> tuple[Change | None, DeltaStat]:
    b_rate, c_rate = baseline.pass_rate, current.pass_rate
    if b_rate is None or c_rate is None:
        return None, DeltaStat(baseline=b_rate, current=c_rate, delta=None)
    delta = c_rate - b_rate
    p_drop = pass_drop_p_value(
        baseline.passed, baseline.evaluable, current.passed, current.evaluable
    )
    p_rise = pass_drop_p_value(
        current.passed, current.evaluable, baseline.passed, baseline.evaluable
    )
    waive = critical and not rules.critical_requires_significance
    kind, p, significant = _classify(delta, p_drop, p_rise, rules=rules, waive_significance=waive)
    stat = DeltaStat(baseline=b_rate, current=c_rate, delta=delta, p_value=p_drop)
    if kind is None:
        return None, stat
    what = "pass rate" if scope == "run" else f"{key}: pass rate"
    message = (
        f"{what} {b_rate:.0%} -> {c_rate:.0%} ({delta:+.0%}; "
        f"{baseline.passed}/{baseline.evaluable} -> {current.passed}/{current.evaluable}"
        + (f", p={p:.3f}" if p is not None else "")
        + (", critical scenario" if critical else "")
        + ")"
    )
    change = Change(
        scope=scope,
        key=key,
        metric="pass_rate",
        baseline=b_rate,
        current=c_rate,
        delta=delta,
        p_value=p,
        significant=significant,
        critical=critical,
        kind=kind,
        message=message,
    )
    return change, stat


def _score_change(
    scope: Scope,
    key: str,
    baseline: MeanStat | None,
    current: MeanStat | None,
    *,
    rules: ComparisonRules,
    critical: bool = False,
) -> tuple[Change | None, DeltaStat]:
    if baseline is None or current is None:
        return None, DeltaStat(
            baseline=baseline.mean if baseline else None,
            current=current.mean if current else None,
            delta=None,
        )
    delta = current.mean - baseline.mean
    p_drop = welch_p_value(baseline, current)
    p_rise = welch_p_value(current, baseline)
    # As for the pass rate: on a critical scenario any drop of a score is a regression.
    waive = critical and not rules.critical_requires_significance
    kind, p, significant = _classify(delta, p_drop, p_rise, rules=rules, waive_significance=waive)
    stat = DeltaStat(baseline=baseline.mean, current=current.mean, delta=delta, p_value=p_drop)
    if kind is None:
        return None, stat
    message = (
        f"{key}: score {baseline.mean:.2f} -> {current.mean:.2f} ({delta:+.2f}"
        + (f", p={p:.3f}" if p is not None else ", not testable")
        + ")"
    )
    change = Change(
        scope=scope,
        key=key,
        metric="score",
        baseline=baseline.mean,
        current=current.mean,
        delta=delta,
        p_value=p,
        significant=significant,
        kind=kind,
        message=message,
    )
    return change, stat


_STATUS_ORDER: dict[str, int] = {
    "regression": 0,
    "errored": 1,
    "drop": 2,
    "improvement": 3,
    "rise": 4,
    "unchanged": 5,
    "added": 6,
    "removed": 7,
}


def _scenario_status(changes: list[Change], errored_now: bool) -> ScenarioChangeStatus:
    if errored_now:
        return "errored"
    kinds = {c.kind for c in changes}
    for kind in ("regression", "drop", "improvement", "rise"):
        if kind in kinds:
            return kind  # type: ignore[return-value]
    return "unchanged"


def _errored_share(run: RunSummary) -> float:
    return run.errored / run.total_trials if run.total_trials else 0.0


def compare_runs(
    current: RunSummary, baseline: RunSummary, rules: ComparisonRules | None = None
) -> Comparison:
    """Compare `current` with `baseline` on their common scenarios (see the module docstring)."""
    rules = rules or ComparisonRules()
    base_ids = {s.scenario_id for s in baseline.scenarios}
    cur_ids = {s.scenario_id for s in current.scenarios}
    common = sorted(base_ids & cur_ids)
    added, removed = sorted(cur_ids - base_ids), sorted(base_ids - cur_ids)
    b_run, c_run = baseline.subset(common), current.subset(common)

    changes: list[Change] = []
    notes: list[str] = []
    reasons: list[str] = []

    run_change, pass_rate = _pass_change("run", "run", b_run, c_run, rules=rules)
    if run_change:
        changes.append(run_change)
    b_dims, c_dims = b_run.dimensions, c_run.dimensions
    dimensions: dict[str, DeltaStat] = {}
    for dim in sorted(set(b_dims) | set(c_dims)):
        change, stat = _score_change(
            "dimension", dim, b_dims.get(dim), c_dims.get(dim), rules=rules
        )
        dimensions[dim] = stat
        if change:
            changes.append(change)

    scenario_deltas: list[ScenarioDelta] = []
    errored: list[str] = []
    for sid in common:
        b, c = baseline.scenario(sid), current.scenario(sid)
        assert b is not None and c is not None
        critical = b.critical or c.critical
        own: list[Change] = []
        change, stat = _pass_change("scenario", sid, b, c, rules=rules, critical=critical)
        if change:
            own.append(change)
        scores: dict[str, DeltaStat] = {}
        for dim in sorted(set(b.scores) | set(c.scores)):
            dim_change, dim_stat = _score_change(
                "scenario_dimension",
                f"{sid}/{dim}",
                b.scores.get(dim),
                c.scores.get(dim),
                rules=rules,
                critical=critical,
            )
            scores[dim] = dim_stat
            if dim_change:
                own.append(dim_change.model_copy(update={"critical": critical}))
        errored_now = c.evaluable == 0 and c.errored > 0 and b.evaluable > 0
        if errored_now:
            errored.append(sid)
            if critical and b.passed > 0:
                own.append(_errored_regression(sid, b))
        changed = bool(b.fingerprint and c.fingerprint and b.fingerprint != c.fingerprint)
        if changed:
            notes.append(f"{sid}: the scenario changed since the baseline (not like for like)")
        scenario_deltas.append(
            ScenarioDelta(
                scenario_id=sid,
                title=c.title or b.title,
                critical=critical,
                status=_scenario_status(own, errored_now),
                pass_rate=stat,
                baseline_counts=(b.passed, b.evaluable),
                current_counts=(c.passed, c.evaluable),
                scores=scores,
                fingerprint_changed=changed,
                errored_now=errored_now,
                changes=own,
            )
        )
        changes += own
    for sid in added:
        s = current.scenario(sid)
        scenario_deltas.append(_one_sided(s, "added"))
    for sid in removed:
        s = baseline.scenario(sid)
        scenario_deltas.append(_one_sided(s, "removed"))
    scenario_deltas.sort(key=lambda d: (_STATUS_ORDER[d.status], not d.critical, d.scenario_id))

    def of(kind: ChangeKind) -> list[Change]:
        picked = [c for c in changes if c.kind == kind]
        return sorted(
            picked,
            key=lambda c: (not c.critical, c.delta if kind in ("regression", "drop") else -c.delta),
        )

    regressions, drops = of("regression"), of("drop")
    improvements, rises = of("improvement"), of("rise")

    if (
        baseline.suite_version
        and current.suite_version
        and (baseline.suite_version != current.suite_version)
    ):
        notes.append(f"suite versions differ ({baseline.suite_version} -> {current.suite_version})")
    if added:
        notes.append(f"only in this run: {', '.join(added)}")
    if removed:
        notes.append(f"only in the baseline: {', '.join(removed)}")

    errored_shares = {"this run": _errored_share(c_run), "the baseline": _errored_share(b_run)}
    unreliable = [
        f"{share:.0%} of the trials of {name} errored (more than {rules.max_errored_share:.0%})"
        for name, share in errored_shares.items()
        if share > rules.max_errored_share
    ]

    verdict: Verdict
    if not common or b_run.evaluable == 0 or c_run.evaluable == 0:
        verdict = "marginal"
        reasons.append("nothing to compare: no common scenario with evaluable trials")
    elif regressions:
        verdict = "fail"
        critical_ones = [c for c in regressions if c.critical]
        if critical_ones:
            reasons.append(
                f"{len(critical_ones)} regression(s) on critical scenarios: "
                + "; ".join(c.message for c in critical_ones[:5])
            )
        other = [c for c in regressions if not c.critical]
        if other:
            reasons.append(
                f"{len(other)} significant regression(s): "
                + "; ".join(c.message for c in other[:5])
            )
    elif drops or unreliable or errored:
        verdict = "marginal"
        if drops:
            reasons.append(
                f"{len(drops)} drop(s) over {rules.min_delta:.0%} that are not significant "
                "(possibly noise): " + "; ".join(c.message for c in drops[:5])
            )
        if errored:
            reasons.append(
                f"{len(errored)} scenario(s) errored in every trial, so not measured: "
                + ", ".join(errored)
            )
    else:
        verdict = "pass"
        reasons.append(f"no drop of more than {rules.min_delta:.0%} on {len(common)} scenario(s)")
    reasons += unreliable

    return Comparison(
        baseline_run_id=baseline.run_id,
        current_run_id=current.run_id,
        baseline_label=baseline.label,
        current_label=current.label,
        verdict=verdict,
        reasons=reasons,
        notes=notes,
        rules=rules,
        pass_rate=pass_rate,
        dimensions=dimensions,
        scenarios=scenario_deltas,
        regressions=regressions,
        improvements=improvements,
        drops=drops,
        rises=rises,
        added=added,
        removed=removed,
        errored=errored,
    )


def _errored_regression(scenario_id: str, baseline: ScenarioSummary) -> Change:
    """A critical scenario that errored in every trial: not shown to hold any more."""
    rate = baseline.pass_rate or 0.0
    return Change(
        scope="scenario",
        key=scenario_id,
        metric="pass_rate",
        baseline=rate,
        current=0.0,
        delta=-rate,
        critical=True,
        kind="regression",
        errored=True,
        message=(
            f"{scenario_id}: passed {baseline.passed} of {baseline.evaluable} before, "
            "errored now (critical scenario)"
        ),
    )


def _one_sided(summary: ScenarioSummary | None, status: ScenarioChangeStatus) -> ScenarioDelta:
    assert summary is not None
    rate = summary.pass_rate
    counts = (summary.passed, summary.evaluable)
    return ScenarioDelta(
        scenario_id=summary.scenario_id,
        title=summary.title,
        critical=summary.critical,
        status=status,
        pass_rate=DeltaStat(
            baseline=rate if status == "removed" else None,
            current=rate if status == "added" else None,
            delta=None,
        ),
        baseline_counts=counts if status == "removed" else None,
        current_counts=counts if status == "added" else None,
    )
