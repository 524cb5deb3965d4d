"""Stored eval runs for page and admin tests, without running an agent: each trial's outcome is
given, written through the same services the runner uses."""

from __future__ import annotations

from typing import Any

from evals import services
from evals.evaluators.score import Check, Score
from evals.evaluators.trial import TrialResult
from evals.models import EvalRun
from evals.runner.transcript import RunError
from evals.scenario import DIMENSIONS, Scenario, Suite, load_suite

_SUITE: Suite | None = None


def suite(pattern: str | None = None) -> Suite:
    global _SUITE
    if _SUITE is None:
        _SUITE = load_suite()
    if pattern is None:
        return _SUITE
    return load_suite(pattern=pattern)


def trial(scenario: Scenario, number: int, status: str, *, score: float = 1.0) -> TrialResult:
    """A trial with the given status; a failed one scores `score` on decision quality."""
    if status == "errored":
        return TrialResult(
            scenario_id=scenario.id,
            trial=number,
            status="errored",
            error=RunError(error_type="AuthenticationError", message="Incorrect API key"),
            failure_reasons=["errored (provider): AuthenticationError"],
            suite_version=suite().version,
            scenario_fingerprint=scenario.fingerprint,
        )
    passed = status == "passed"
    scores = {
        dim: Score(
            dimension=dim,
            value=1.0 if passed or dim != "decision_quality" else score,
            passed=passed or dim != "decision_quality",
            checks=[Check(name="severity acceptable", passed=passed or dim != "decision_quality")],
        )
        for dim in DIMENSIONS
    }
    return TrialResult(
        scenario_id=scenario.id,
        trial=number,
        status="passed" if passed else "failed",
        scores=scores,
        required_dimensions=list(DIMENSIONS),
        failure_reasons=[] if passed else ["decision_quality: severity acceptable (low)"],
        severity_filed=scenario.expect.severity if passed else "low",
        suite_version=suite().version,
        scenario_fingerprint=scenario.fingerprint,
    )


def make_run(
    outcomes: dict[str, list[str]] | None = None,
    *,
    scenarios: list[Scenario] | None = None,
    trials: int = 3,
    baseline: bool = False,
    finish: bool = True,
    conversations: bool = False,
    **fields: Any,
) -> EvalRun:
    """A run over `scenarios` (default: the first three of the suite), every trial passed
    except as `outcomes` says ({"scenario_id": ["passed", "failed", "errored"]})."""
    chosen = scenarios or suite().scenarios[:3]
    the_suite = suite().model_copy(update={"scenarios": chosen})
    run = services.start_run(
        the_suite, trials=trials, provider="openai", model="gpt-test", revision="abc123def456"
    )
    if fields:
        EvalRun.objects.filter(pk=run.pk).update(**fields)
        run.refresh_from_db()
    for scenario in chosen:
        statuses = (outcomes or {}).get(scenario.id, ["passed"] * trials)
        for number, status in enumerate(statuses, start=1):
            conversation_id = None
            if conversations:
                conversation, _ = services.start_trial(
                    run, scenario, number, provider="openai", model="gpt-test"
                )
                conversation_id = conversation.pk
            services.record_result(
                run, trial(scenario, number, status), conversation_id=conversation_id
            )
    if finish:
        services.finish_run(run, suite=the_suite)
    if baseline:
        services.mark_baseline(run)
    run.refresh_from_db()
    return run
