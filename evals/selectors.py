"""Reads for the evals pages and the `run_evals` command. Each makes a fixed number of queries,
however many runs or results there are."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q
from django.http import Http404

from evals import verdict_words
from evals.api_source import EVAL_KEY, filed_report
from evals.charts import NARROW, RunChart, run_chart
from evals.compare import Comparison, ScenarioDelta, compare_runs
from evals.evaluators.trial import TrialResult
from evals.models import EvalResult, EvalRun
from evals.scenario import DIMENSIONS
from evals.stats import RunSummary, ScenarioSummary, summarise_run
from releases.eval_hooks import TrialVerdict
from releases.models import Conversation, RunStatus

RECENT_RUNS = 30
BASELINE = "baseline"


def with_progress(runs: Any) -> Any:
    """Annotate runs with how many trials they recorded, and how those went."""
    return runs.annotate(
        done=Count("results"),
        passed_count=Count("results", filter=Q(results__passed=True)),
        failed_count=Count("results", filter=Q(results__passed=False)),
        errored_count=Count("results", filter=Q(results__passed__isnull=True)),
    )


@dataclass(frozen=True)
class Progress:
    run_id: int
    status: str
    done: int
    planned: int
    passed: int
    failed: int
    errored: int
    error: str = ""

    @property
    def active(self) -> bool:
        return self.status in RunStatus.active()

    def _pct(self, count: int) -> float:
        return round(100 * count / self.planned, 2) if self.planned else 0.0

    @property
    def passed_pct(self) -> float:
        return self._pct(self.passed)

    @property
    def failed_pct(self) -> float:
        return self._pct(self.failed)

    @property
    def errored_pct(self) -> float:
        return self._pct(self.errored)


def progress_of(run: EvalRun) -> Progress:
    """From a run annotated by `with_progress`."""
    return Progress(
        run_id=run.pk,
        status=run.status,
        done=run.done,
        planned=run.planned_trials,
        passed=run.passed_count,
        failed=run.failed_count,
        errored=run.errored_count,
        error=run.error,
    )


def progress(run_id: int) -> Progress:
    """One query."""
    run = with_progress(EvalRun.objects.filter(pk=run_id)).first()
    if run is None:
        raise Http404("No such eval run.")
    return progress_of(run)


# ---- the evals page ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Overview:
    runs: list[EvalRun]  # newest first, annotated by with_progress
    baseline: EvalRun | None
    active: list[Progress]
    chart: RunChart
    narrow_chart: RunChart


@dataclass(frozen=True)
class VerdictWords:
    """What the verdict banner says (evals/verdict_words.py): the sentence, each scenario that
    moved with its dimensions under it, and what weakens the verdict."""

    verdict: str
    headline: str
    moved: list[verdict_words.ScenarioWords]
    caveats: list[str]

    @classmethod
    def of(cls, comparison: Comparison) -> VerdictWords:
        return cls(
            verdict=comparison.verdict,
            headline=verdict_words.headline(comparison),
            moved=verdict_words.moved(comparison),
            caveats=verdict_words.caveats(comparison),
        )


def verdict_against(run: EvalRun, baseline: EvalRun | None) -> Comparison | None:
    """The run compared with the baseline, when both have results (no query: the stored
    summaries); None for the baseline itself or a run still going."""
    if baseline is None or run.pk == baseline.pk or run.status != RunStatus.SUCCEEDED:
        return None
    current, base = run.run_summary(), baseline.run_summary()
    if current is None or base is None:
        return None
    return compare_runs(current, base)


# A finished run's stored summary never changes, so its verdict against a given baseline is
# worked out once per process: the list shows 30 of them, at a few milliseconds each.
_VERDICTS: dict[tuple[int, Any, int, Any], str | None] = {}
_VERDICTS_MAX = 4096


def _verdict(run: EvalRun, baseline: EvalRun | None) -> str | None:
    if baseline is None:
        return None
    key = (run.pk, run.finished_at, baseline.pk, baseline.finished_at)
    if key not in _VERDICTS:
        if len(_VERDICTS) >= _VERDICTS_MAX:
            _VERDICTS.clear()
        comparison = verdict_against(run, baseline)
        _VERDICTS[key] = comparison.verdict if comparison else None
    return _VERDICTS[key]


def verdict_of(run: EvalRun) -> str | None:
    """The run's verdict against the current baseline (pass, marginal, fail), or None."""
    return _verdict(run, EvalRun.objects.filter(is_baseline=True).first())


def overview(limit: int = RECENT_RUNS) -> Overview:
    """Recent runs with their progress and their verdict against the baseline (`.verdict`:
    pass, marginal, fail, or None), and the baseline: two queries."""
    runs = list(with_progress(EvalRun.objects.all()).order_by("-created_at", "-id")[:limit])
    baseline = next((run for run in runs if run.is_baseline), None)
    if baseline is None:
        baseline = EvalRun.objects.filter(is_baseline=True).first()
    for run in runs:
        run.verdict = _verdict(run, baseline)
    return Overview(
        runs=runs,
        baseline=baseline,
        active=[progress_of(run) for run in runs if run.is_active],
        chart=run_chart(runs),
        narrow_chart=run_chart(runs, NARROW),
    )


# ---- one run ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialRow:
    result: EvalResult
    trial: TrialResult | None

    @property
    def reasons(self) -> list[str]:
        return self.trial.failure_reasons if self.trial else []


@dataclass(frozen=True)
class ScenarioRow:
    summary: ScenarioSummary
    trials: list[TrialRow]


@dataclass(frozen=True)
class RunDetail:
    run: EvalRun
    summary: RunSummary | None
    progress: Progress
    scenarios: list[ScenarioRow]
    dimensions: list[str]
    baseline: EvalRun | None
    comparison: Comparison | None = None  # against the baseline, once the run is over

    @property
    def can_compare(self) -> bool:
        return self.baseline is not None and self.baseline.pk != self.run.pk

    @property
    def verdict(self) -> VerdictWords | None:
        return VerdictWords.of(self.comparison) if self.comparison else None


def _summary(run: EvalRun, results: list[EvalResult]) -> RunSummary | None:
    stored = run.run_summary()
    if stored is not None:
        return stored
    trials = [t for t in (r.trial_result() for r in results) if t is not None]
    if not trials:
        return None
    return summarise_run(
        trials, run_id=str(run.pk), label=run.label, suite_version=run.suite_version
    )


def run_detail(pk: int) -> RunDetail:
    """A run, its trials and its summary (stored, or computed while it runs): three queries."""
    run = with_progress(EvalRun.objects.filter(pk=pk)).first()
    if run is None:
        raise Http404("No such eval run.")
    results = list(
        run.results.select_related("conversation")
        .only(
            "scenario_id",
            "trial",
            "scores",
            "passed",
            "error",
            "run_id",
            "conversation__id",
            "conversation__trace_id",
            "conversation__status",
        )
        .order_by("scenario_id", "trial")
    )
    baseline = run if run.is_baseline else EvalRun.objects.filter(is_baseline=True).first()
    summary = _summary(run, results)
    by_scenario: dict[str, list[TrialRow]] = {}
    for result in results:
        by_scenario.setdefault(result.scenario_id, []).append(
            TrialRow(result, result.trial_result())
        )
    rows = []
    if summary is not None:
        rows = [
            ScenarioRow(s, by_scenario.get(s.scenario_id, []))
            for s in sorted(summary.scenarios, key=_scenario_order)
        ]
    dimensions = _dimensions(summary)
    return RunDetail(
        run=run,
        summary=summary,
        progress=progress_of(run),
        scenarios=rows,
        dimensions=dimensions,
        baseline=baseline,
        comparison=verdict_against(run, baseline),
    )


def _scenario_order(s: ScenarioSummary) -> tuple[int, str]:
    rank = {"failed": 0, "flaky": 1, "errored": 2, "passed": 3}
    return rank.get(s.status, 4), s.scenario_id


def _dimensions(*summaries: RunSummary | None) -> list[str]:
    found = {d for s in summaries if s is not None for d in s.dimensions}
    return [d for d in (*DIMENSIONS, "judge") if d in found] + sorted(
        found - {*DIMENSIONS, "judge"}
    )


# ---- comparing two runs -----------------------------------------------------------------------


@dataclass(frozen=True)
class CompareRow:
    delta: ScenarioDelta
    current: ScenarioSummary | None
    baseline: ScenarioSummary | None
    current_trials: list[EvalResult]
    baseline_trials: list[EvalResult]


@dataclass(frozen=True)
class CompareView:
    run: EvalRun
    against: EvalRun
    comparison: Comparison
    rows: list[CompareRow]
    dimensions: list[str]
    choices: list[EvalRun] = field(default_factory=list)  # runs to compare with instead

    @property
    def verdict(self) -> VerdictWords:
        return VerdictWords.of(self.comparison)

    @property
    def sides(self) -> list[tuple[str, EvalRun]]:
        return [("Baseline", self.against), ("This run", self.run)]


class NothingToCompare(Exception):
    """The run (or the one to compare with) has no summary yet, or there is no baseline."""


def against_run(against: str | int | None, *, exclude: int | None = None) -> EvalRun:
    """The run named by `against`: an id, or "baseline" (the default). One query."""
    if against in (None, "", BASELINE):
        baseline = EvalRun.objects.filter(is_baseline=True).first()
        if baseline is None:
            raise NothingToCompare("There is no baseline run yet.")
        return baseline
    try:
        pk = int(against)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise Http404("Compare with a run id or 'baseline'.") from None
    run = EvalRun.objects.filter(pk=pk).first()
    if run is None:
        raise Http404("No such eval run.")
    return run


def compare(run: EvalRun, against: EvalRun) -> Comparison:
    """Compare two finished runs (their stored summaries; no query)."""
    current, baseline = run.run_summary(), against.run_summary()
    if current is None or baseline is None:
        missing = run if current is None else against
        raise NothingToCompare(f"Run #{missing.pk} has no results to compare yet.")
    return compare_runs(current, baseline)


def compare_view(pk: int, against: str | None) -> CompareView:
    """The compare page: four queries (the run, the other run, both runs' trials, the runs
    to pick from instead)."""
    run = EvalRun.objects.filter(pk=pk).first()
    if run is None:
        raise Http404("No such eval run.")
    other = against_run(against)
    comparison = compare(run, other)
    results = (
        EvalResult.objects.filter(run__in=[run.pk, other.pk])
        .select_related("conversation")
        .only(
            "run_id",
            "scenario_id",
            "trial",
            "passed",
            "error",
            "conversation__id",
            "conversation__trace_id",
        )
        .order_by("scenario_id", "trial")
    )
    trials: dict[tuple[int, str], list[EvalResult]] = {}
    for result in results:
        trials.setdefault((result.run_id, result.scenario_id), []).append(result)
    current_summary, baseline_summary = run.run_summary(), other.run_summary()
    assert current_summary is not None and baseline_summary is not None
    rows = [
        CompareRow(
            delta=delta,
            current=current_summary.scenario(delta.scenario_id),
            baseline=baseline_summary.scenario(delta.scenario_id),
            current_trials=trials.get((run.pk, delta.scenario_id), []),
            baseline_trials=trials.get((other.pk, delta.scenario_id), []),
        )
        for delta in comparison.scenarios
    ]
    choices = list(
        EvalRun.objects.filter(status=RunStatus.SUCCEEDED)
        .exclude(pk=run.pk)
        .only("pk", "created_at", "model", "is_baseline", "suite_version")
        .order_by("-created_at", "-id")[:RECENT_RUNS]
    )
    if other not in choices:
        choices.append(other)
    return CompareView(
        run=run,
        against=other,
        comparison=comparison,
        rows=rows,
        choices=choices,
        dimensions=_dimensions(current_summary, baseline_summary),
    )


def trial_verdict(run: Conversation) -> TrialVerdict | None:
    """The verdict on the eval trial this run was, or None for an assessment: one query.
    The run page asks for it through `releases.eval_hooks`."""
    if not (run.metadata or {}).get(EVAL_KEY):
        return None
    result = EvalResult.objects.filter(conversation=run).order_by("-created_at").first()
    if result is None:
        return None
    trial = result.trial_result()
    failed = []
    if trial is not None:
        for name, score in sorted(trial.scores.items()):
            failed += [(name, c.name, c.detail) for c in score.checks if not c.passed]
    return TrialVerdict(
        status=result.status,
        severity_filed=trial.severity_filed if trial else None,
        reasons=list(trial.failure_reasons) if trial else [],
        failed_checks=failed,
        result_id=result.pk,
        eval_run_id=result.run_id,
    )


@dataclass(frozen=True, slots=True)
class OwnShare:
    """The model's own share of its filed reports, for one prompt profile: `mean`, of the
    reports' text (findings and summary); `held` and `unchecked`, of that own text over the
    reports that had any, the share the grounding found in the data and the share it could
    not check (None: no report had words of its own)."""

    profile: str
    mean: float
    reports: int
    held: float | None = None
    unchecked: float | None = None
    with_own: int = 0
    # Each filed report's own figures: (scenario id, trial, share, held, unchecked).
    per_report: tuple[tuple[str, int, float, float | None, float | None], ...] = ()


def own_shares(run: EvalRun) -> list[OwnShare]:
    """Per prompt profile, the mean share of the filed reports' text that is the model's own
    (`risk.own_words`), over the trials that filed a report, and how much of it holds."""
    shares: dict[str, list[float]] = {}
    held: dict[str, list[tuple[float, float]]] = {}
    each: dict[str, list[tuple[str, int, float, float | None, float | None]]] = {}
    rows = (
        Conversation.objects.filter(eval_results__run=run)
        .order_by("eval_results__scenario_id", "eval_results__trial")
        .values_list("metadata", "eval_results__scenario_id", "eval_results__trial")
    )
    for metadata, scenario_id, trial in rows:
        report = filed_report(metadata or {})
        share = report.get("own_share") if report else None
        if not isinstance(share, int | float):
            continue
        profile = str((metadata or {}).get("prompt_profile") or "unknown")
        shares.setdefault(profile, []).append(float(share))
        own_held, own_unchecked = report.get("own_held"), report.get("own_unchecked")
        both = isinstance(own_held, int | float) and isinstance(own_unchecked, int | float)
        if both:
            held.setdefault(profile, []).append((float(own_held), float(own_unchecked)))
        each.setdefault(profile, []).append(
            (
                scenario_id,
                trial,
                float(share),
                float(own_held) if both else None,
                float(own_unchecked) if both else None,
            )
        )
    found = []
    for profile, values in sorted(shares.items()):
        pairs = held.get(profile, [])
        found.append(
            OwnShare(
                profile,
                sum(values) / len(values),
                len(values),
                held=sum(h for h, _ in pairs) / len(pairs) if pairs else None,
                unchecked=sum(u for _, u in pairs) / len(pairs) if pairs else None,
                with_own=len(pairs),
                per_report=tuple(each.get(profile, [])),
            )
        )
    return found
