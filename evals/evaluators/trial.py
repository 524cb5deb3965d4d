"""A whole trial: every evaluator's score, then the status: errored (the run failed for a
reason outside the agent), passed (every required dimension passed, no critical check failed)
or failed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evals.evaluators.decision_quality import DecisionQualityEvaluator
from evals.evaluators.error_handling import ErrorHandlingEvaluator
from evals.evaluators.score import AsyncEvaluator, Evaluator, Score
from evals.evaluators.tool_usage import ToolUsageEvaluator
from evals.runner.transcript import RunError, Transcript, TrialMetrics
from evals.scenario import DIMENSIONS, Scenario

TrialStatus = Literal["passed", "failed", "errored"]


class TrialResult(BaseModel):
    """One trial of one scenario, evaluated. Round-trips through JSON, so the Django side can
    store it whole (`model_dump(mode="json")`) and rebuild it for summaries."""

    model_config = ConfigDict(frozen=True)

    scenario_id: str
    trial: int = 0
    status: TrialStatus
    scores: dict[str, Score] = Field(default_factory=dict)
    required_dimensions: list[str] = Field(default_factory=list)
    critical_failures: list[str] = Field(default_factory=list)
    # Short reasons: the failed checks of required dimensions, then critical ones.
    failure_reasons: list[str] = Field(default_factory=list)
    error: RunError | None = None
    severity_filed: str | None = None
    metrics: TrialMetrics = Field(default_factory=TrialMetrics)
    suite_version: str | None = None
    scenario_fingerprint: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def errored(self) -> bool:
        return self.status == "errored"


DEFAULT_EVALUATORS: tuple[Evaluator, ...] = (
    ToolUsageEvaluator(),
    DecisionQualityEvaluator(),
    ErrorHandlingEvaluator(),
)


def _decide(
    scenario: Scenario,
    transcript: Transcript,
    scores: dict[str, Score],
    *,
    trial: int,
    suite_version: str | None,
    extra_required: Iterable[str] = (),
) -> TrialResult:
    report = transcript.filed_report()
    base: dict[str, Any] = {
        "scenario_id": scenario.id,
        "trial": trial,
        "severity_filed": report.severity if report else None,
        "metrics": transcript.metrics(),
        "suite_version": suite_version,
        "scenario_fingerprint": scenario.fingerprint,
    }
    error = transcript.run_error()
    if error is not None and not error.is_agent_fault:
        return TrialResult(
            status="errored",
            error=error,
            failure_reasons=[f"errored ({error.resolved_category}): {error.error_type}"],
            **base,
        )

    required = list(scenario.expect.required_dimensions or [d for d in DIMENSIONS if d in scores])
    required += [d for d in extra_required if d not in required]
    reasons: list[str] = []
    errored_judge = False
    for dim in required:
        score = scores.get(dim)
        if score is None:
            continue  # not applicable to this scenario
        if score.errored:
            errored_judge = True
            reasons.append(f"{dim}: could not be scored ({'; '.join(score.details)})")
        elif not score.passed:
            failed = score.failed_checks
            if failed:
                reasons += [
                    f"{dim}: {c.name}" + (f" ({c.detail})" if c.detail else "") for c in failed
                ]
            else:
                reasons.append(f"{dim}: {score.value:.2f}")
    critical = [
        f"{dim}: {c.name}" + (f" ({c.detail})" if c.detail else "")
        for dim, score in scores.items()
        for c in score.checks
        if c.critical and not c.passed
    ]
    reasons += [r for r in critical if r not in reasons]
    if errored_judge:
        status: TrialStatus = "errored"
    else:
        status = "failed" if reasons else "passed"
    return TrialResult(
        status=status,
        scores=scores,
        required_dimensions=required,
        critical_failures=critical,
        failure_reasons=reasons,
        error=error,
        **base,
    )


def evaluate(
    scenario: Scenario,
    transcript: Transcript,
    *,
    trial: int = 0,
    suite_version: str | None = None,
    evaluators: Sequence[Evaluator] = DEFAULT_EVALUATORS,
) -> TrialResult:
    """Evaluate one trial with the deterministic evaluators.

    The trial is *errored* when the run failed for a reason outside the agent (provider,
    cancellation, infrastructure): it is not scored. Otherwise it *passes* when every required
    dimension passes (by default every applicable deterministic one) and no critical check
    fails, and *fails* otherwise; a crash of the agent itself is a failure.
    """
    scores: dict[str, Score] = {}
    error = transcript.run_error()
    if error is None or error.is_agent_fault:
        for evaluator in evaluators:
            score = evaluator.evaluate(scenario, transcript)
            if score is not None:
                scores[score.dimension] = score
    return _decide(scenario, transcript, scores, trial=trial, suite_version=suite_version)


async def aevaluate(
    scenario: Scenario,
    transcript: Transcript,
    *,
    judge: AsyncEvaluator | None = None,
    judge_required: bool = False,
    trial: int = 0,
    suite_version: str | None = None,
    evaluators: Sequence[Evaluator] = DEFAULT_EVALUATORS,
) -> TrialResult:
    """`evaluate`, plus the LLM judge when one is given. The judge's score is informative
    unless `judge_required` (or the scenario lists "judge" in required_dimensions)."""
    result = evaluate(
        scenario, transcript, trial=trial, suite_version=suite_version, evaluators=evaluators
    )
    if judge is None or result.errored:
        return result
    judged = await judge.evaluate(scenario, transcript)
    if judged is None:
        return result
    scores = {**result.scores, judged.dimension: judged}
    return _decide(
        scenario,
        transcript,
        scores,
        trial=trial,
        suite_version=suite_version,
        extra_required=[judge.dimension] if judge_required else (),
    )
