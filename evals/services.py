"""Writes for evaluation runs: start, record a trial, heartbeat, finish, mark the baseline.

The runner (`evals/runner/trials.py`) and the `run_evals` command change runs only through here.
Each write is saved first, then published to the run's channel group (`evalrun-<id>`), where
the evals pages listen for progress; a page that misses a message rebuilds the same view
from the database.
"""

from __future__ import annotations

import logging
import subprocess
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from assessments import services as release_services
from assessments.timeline import outcome
from evals import api_source
from evals.evaluators.trial import TrialResult
from evals.live import progress_message, run_group
from evals.models import EvalResult, EvalRun
from evals.reports import json_report
from evals.scenario import Scenario, Suite
from evals.stats import RunSummary, summarise_run
from releases.models import Conversation, RunStatus

logger = logging.getLogger(__name__)

# A running eval run whose process has not been heard of for this long has died.
STALE_AFTER = timedelta(minutes=2)


def code_revision(cwd: Path | None = None) -> str:
    """The git commit the code runs from, or "unknown" (no git, not a checkout)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd or settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    revision = out.stdout.strip()
    return revision[:64] if revision else "unknown"


def start_run(
    suite: Suite,
    *,
    trials: int,
    provider: str,
    model: str,
    config: dict[str, Any] | None = None,
    notes: str = "",
    revision: str | None = None,
) -> EvalRun:
    """A new run of `suite`, running from now on."""
    now = timezone.now()
    return EvalRun.objects.create(
        suite_version=suite.version,
        provider=provider[:32],
        model=model[:128],
        code_revision=(revision or code_revision())[:64],
        status=RunStatus.RUNNING,
        planned_trials=len(suite.scenarios) * trials,
        config={"trials": trials, "scenarios": suite.ids, **(config or {})},
        notes=notes,
        created_at=now,
        started_at=now,
        heartbeat_at=now,
    )


def record_result(
    run: EvalRun, result: TrialResult, *, conversation_id: Any = None, publish: bool = True
) -> EvalResult:
    """Store one evaluated trial, then tell the pages how far the run has got (unless the
    caller publishes itself: the runner sends one message for trials that end together)."""
    stored = EvalResult.objects.create(
        run=run,
        scenario_id=result.scenario_id,
        trial=result.trial,
        scores=result.model_dump(mode="json"),
        passed=None if result.errored else result.passed,
        error=_error_text(result),
        conversation_id=conversation_id,
    )
    EvalRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
    if publish:
        publish_progress(run.pk)
    return stored


def _error_text(result: TrialResult) -> str:
    if result.error is None:
        return ""
    message = f"{result.error.error_type}: {result.error.message}".strip().rstrip(":")
    return f"[{result.error.resolved_category}] {message}"


def heartbeat(run_id: int, trial_conversations: list[Any] | None = None) -> None:
    """The running process's sign of life, for the run and its running trials (else the
    assessments' stale-run sweep would take the trials for dead runs)."""
    now = timezone.now()
    EvalRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(heartbeat_at=now)
    if trial_conversations:
        Conversation.objects.filter(pk__in=trial_conversations, status=RunStatus.RUNNING).update(
            heartbeat_at=now
        )


def summarise(run: EvalRun, suite: Suite | None = None) -> RunSummary:
    """The run's summary, from its stored trial results."""
    trials = [
        TrialResult.model_validate(scores)
        for scores in run.results.order_by("scenario_id", "trial").values_list("scores", flat=True)
        if scores.get("status")
    ]
    return summarise_run(
        trials,
        scenarios=suite.scenarios if suite is not None else (),
        run_id=str(run.pk),
        label=run.label,
        suite_version=run.suite_version,
        created_at=run.created_at,
        metadata={
            "provider": run.provider,
            "model": run.model,
            "code_revision": run.code_revision,
            **{k: v for k, v in run.config.items() if k != "scenarios"},
        },
    )


def summary_json(summary: RunSummary) -> dict[str, Any]:
    """What EvalRun.summary holds: the report's headline figures for lists and charts, and
    the whole summary for comparisons."""
    return {**json_report(summary)["summary"], "run_summary": summary.model_dump(mode="json")}


def finish_run(
    run: EvalRun,
    *,
    suite: Suite | None = None,
    status: RunStatus | str = RunStatus.SUCCEEDED,
    error: str = "",
) -> RunSummary | None:
    """End the run: summarise what it recorded and store the summary (even a failed or
    interrupted run keeps the trials it finished)."""
    summary = summarise(run, suite) if run.results.exists() else None
    run.status = status
    run.error = error
    run.finished_at = timezone.now()
    run.summary = summary_json(summary) if summary is not None else None
    run.save(update_fields=["status", "error", "finished_at", "summary"])
    publish_progress(run.pk)
    return summary


@transaction.atomic
def mark_baseline(run: EvalRun) -> EvalRun:
    """Make `run` the baseline, and no other (the database allows one only)."""
    if run.status != RunStatus.SUCCEEDED:
        raise ValueError("Only a finished, successful run can be the baseline.")
    EvalRun.objects.select_for_update().filter(is_baseline=True).exclude(pk=run.pk).update(
        is_baseline=False
    )
    EvalRun.objects.filter(pk=run.pk).update(is_baseline=True)
    run.is_baseline = True
    return run


def fail_stale_runs(now: datetime | None = None) -> int:
    """Mark failed the running runs whose process stopped beating (killed, crashed); they
    keep the summary of the trials they finished. The evals pages call this as they load."""
    now = now or timezone.now()
    cutoff = now - STALE_AFTER
    failed = 0
    for run in EvalRun.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=cutoff):
        claimed = EvalRun.objects.filter(
            pk=run.pk, status=RunStatus.RUNNING, heartbeat_at__lt=cutoff
        ).update(
            status=RunStatus.FAILED,
            finished_at=now,
            error="The process running it stopped responding; the run was marked failed.",
        )
        if not claimed:
            continue  # it beat meanwhile, or someone else ended it
        if run.results.exists():
            EvalRun.objects.filter(pk=run.pk).update(summary=summary_json(summarise(run)))
        publish_progress(run.pk)
        failed += 1
    return failed


def publish_progress(run_id: int) -> None:
    """Send the run's progress to the pages watching it (after the write is committed)."""

    def send() -> None:
        try:
            message = progress_message(run_id)
            async_to_sync(get_channel_layer().group_send)(run_group(run_id), message)
        except Exception:
            logger.warning("could not publish the progress of eval run %s", run_id, exc_info=True)

    transaction.on_commit(send)


# ---- trials: the Conversation behind each --------------------------------------------------


def start_trial(
    run: EvalRun,
    scenario: Scenario,
    trial: int,
    *,
    provider: str,
    model: str,
    tool_timeout_s: float | None = None,
    release_pk: int | None = None,
) -> tuple[Conversation, str]:
    """The trial's Conversation (running, marked as an eval trial) and its API token;
    `release_pk`: the release ingested for a scenario made of files."""
    now = timezone.now()
    conversation = Conversation.objects.create(
        release=None,
        status=RunStatus.RUNNING,
        provider=provider[:32],
        model=model[:128],
        metadata=api_source.trial_metadata(
            scenario,
            run_id=run.pk,
            trial=trial,
            suite_version=run.suite_version,
            tool_timeout_s=tool_timeout_s,
            release_pk=release_pk,
        ),
        started_at=now,
        heartbeat_at=now,
    )
    return conversation, release_services.issue_run_token(conversation.pk)


def finish_trial(
    conversation_id: Any, terminal: dict[str, Any] | None, metadata: dict[str, Any]
) -> dict[str, Any] | None:
    """Record how the trial's run ended (`terminal`: its last event's JSON, None when it had
    none); its token stops working. Returns the report the trial filed, as the API kept it."""
    if terminal is None:
        status, error = RunStatus.FAILED, "The trial ended without a final event."
    else:
        status, error = outcome(str(terminal.get("kind")), terminal)
    usage = metadata.get("usage") or {}
    cost = metadata.get("estimated_cost_usd")
    release_services.finish_run(
        conversation_id,
        status=status,
        error=error,
        input_tokens=usage.get("input_tokens"),
        output_tokens=usage.get("output_tokens"),
        estimated_cost=Decimal(str(round(cost, 6))) if isinstance(cost, int | float) else None,
    )
    stored = Conversation.objects.filter(pk=conversation_id).values_list("metadata", flat=True)
    return api_source.filed_report(stored.first() or {})
