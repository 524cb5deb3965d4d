"""Writes. Views, commands, tasks and the agent seam change release data only through here.

Over 600 lines on purpose: the one door for the app's writes (runs, reports, reviews).
"""

from __future__ import annotations

import enum
import hashlib
import logging
import secrets
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import Max, Q
from django.utils import timezone
from opentelemetry import propagate

from assessments import layer_health, workers
from releases import data_fingerprint, signals, verdicts
from releases.models import (
    AgentEvent,
    Conversation,
    Message,
    Release,
    ReportOrigin,
    ReviewDecision,
    RiskPolicy,
    RiskReport,
    RunStatus,
    Severity,
)
from releases.stored_data import finite
from releases.verdicts import Judged
from review.scenario import Label, scenario_id, to_toml
from risk import filing
from risk.carried import with_policy_parts
from risk.figures import numbers_in
from risk.filing import FilingDecision
from risk.policy import PolicySettings, threshold_order_problems


def create_release(
    *,
    version: str,
    title: str = "",
    changes: Sequence[str] | None = None,
    test_results: dict[str, Any] | None = None,
    deployment_metrics: dict[str, Any] | None = None,
    created_at: datetime | None = None,
) -> Release:
    """Create a release after validating its data (None means missing)."""
    release = Release(
        version=version,
        title=title,
        # Any other type goes to validation as it is (list() of a dict would keep its keys).
        changes=list(changes) if isinstance(changes, list | tuple) else changes,
        test_results=test_results,
        deployment_metrics=deployment_metrics,
    )
    if created_at is not None:
        release.created_at = created_at
    release.full_clean()
    release.save()
    return release


def file_risk_report(
    *,
    release: Release,
    severity: Severity | str,
    findings: Sequence[str],
    summary: str = "",
    conversation: Conversation | None = None,
    filed_at: datetime | None = None,
    judged: Judged | None = None,
    decision: FilingDecision | None = None,
    origin: ReportOrigin | str = ReportOrigin.MODEL,
) -> RiskReport:
    """Store a risk report for a release (validated: severity, findings), with the policy's
    verdict on the same data: the policy's judgement is taken now unless given."""
    judged = judged or verdicts.judge_release(release)
    # What the model left out of the policy's evidence ends the findings, marked as the
    # policy's (issue 30: the model adds, never subtracts).
    added = [s for s in decision.from_policy if s not in findings] if decision else []
    report = RiskReport(
        release=release,
        severity=severity,
        findings=[*findings, *added],
        policy_findings=added,
        summary=summary,
        conversation=conversation,
        policy=judged.policy,
        policy_severity=judged.verdict.severity,
        signals=[signal.as_dict() for signal in judged.verdict.signals],
        origin=origin,
    )
    if decision is not None:
        report.grounding = with_policy_parts(decision.grounding.as_list(), added)
        report.needs_review = decision.needs_review
        report.review_reasons = decision.review_reasons
        report.notes = decision.notes
    if filed_at is not None:
        report.filed_at = filed_at
    report.full_clean()
    report.save()
    signals.send_on_commit(signals.verdict_filed, RiskReport, report=report)
    return report


def new_policy_version(
    settings: PolicySettings, *, note: str = "", user: AbstractBaseUser | None = None
) -> RiskPolicy:
    """Save `settings` as the next version of the risk policy (versions are never edited).
    Thresholds out of order are refused (ValueError, saying which)."""
    if problems := threshold_order_problems(settings):
        raise ValueError(" ".join(problems))
    with transaction.atomic():
        latest = RiskPolicy.objects.select_for_update().order_by("-version").first()
        return RiskPolicy.objects.create(
            version=(latest.version if latest else 0) + 1,
            thresholds=settings.model_dump(mode="json"),
            note=note,
            created_by=user if user is not None and user.pk else None,
        )


REFUSALS_KEY = "policy_refusals"


@dataclass(frozen=True, slots=True)
class CheckedFiling:
    """A filing checked against the policy: refused (with the message), or stored."""

    decision: FilingDecision
    report: RiskReport | None = None


def file_checked_report(
    *,
    release: Release,
    severity: str,
    findings: Sequence[str],
    summary: str = "",
    conversation: Conversation | None = None,
    filed_at: datetime | None = None,
) -> CheckedFiling:
    """File a report the way the API does: checked against the policy and the data.

    A run's first filing with problems is refused (counted on the run, so that the second
    is stored for review); a caller without a run gets no second chance to remember, so its
    filing is stored at once, marked for review when it has problems."""
    judged = verdicts.judge_release(release)
    refused_before = conversation is None or bool((conversation.metadata or {}).get(REFUSALS_KEY))
    decision = filing.decide(
        severity=severity,
        findings=findings,
        summary=summary,
        data=judged.summary,
        verdict=judged.verdict,
        cfg=judged.settings,
        refused_before=refused_before,
        shown=judged.for_agent(),
        summary_read=verdicts.read_the_summary(conversation) if conversation else None,
        investigated=numbers_in(verdicts.drill_downs_shown(conversation)) if conversation else (),
    )
    if decision.refused:
        assert conversation is not None
        note_refusal(
            conversation,
            decision,
            filing={"severity": severity, "findings": list(findings), "summary": summary},
        )
        return CheckedFiling(decision)
    report = file_risk_report(
        release=release,
        severity=severity,
        findings=findings,
        summary=summary,
        conversation=conversation,
        filed_at=filed_at,
        judged=judged,
        decision=decision,
    )
    return CheckedFiling(decision, report)


def note_refusal(
    conversation: Conversation,
    decision: FilingDecision,
    *,
    filing: dict[str, Any] | None = None,
) -> None:
    """Count a refused filing on the run (merged into its metadata, which the agent's store
    also writes), with the filing itself: should the model never correct it, it is what the
    run stores for a person (`assessments.outcomes`)."""
    with transaction.atomic():
        row = Conversation.objects.select_for_update().get(pk=conversation.pk)
        refusals = list((row.metadata or {}).get(REFUSALS_KEY, []))
        refusal: dict[str, Any] = {"problems": decision.problems, "at": timezone.now().isoformat()}
        if filing is not None:
            refusal["filing"] = filing
        refusals.append(refusal)
        row.metadata = {**(row.metadata or {}), REFUSALS_KEY: refusals}
        row.save(update_fields=["metadata"])
    conversation.metadata = row.metadata


def _lock(conversation: Conversation) -> None:
    """Serialise appends to one conversation (a row lock; SQLite's IMMEDIATE transactions
    already serialise writers)."""
    Conversation.objects.select_for_update().only("pk").get(pk=conversation.pk)


def append_message(
    conversation: Conversation,
    *,
    role: Message.Role | str,
    content: str = "",
    tool_calls: list[dict[str, Any]] | None = None,
    tool_call_id: str = "",
    metadata: dict[str, Any] | None = None,
    created_at: datetime | None = None,
) -> Message:
    """Append a message at the next position of the conversation."""
    with transaction.atomic():
        _lock(conversation)
        last = conversation.messages.aggregate(last=Max("position"))["last"]
        return Message.objects.create(
            conversation=conversation,
            position=0 if last is None else last + 1,
            role=role,
            content=content,
            tool_calls=tool_calls or [],
            tool_call_id=tool_call_id,
            metadata=metadata or {},
            created_at=created_at or timezone.now(),
        )


class RunEnded(Exception):
    """The run has already ended: its events are closed."""

    def __init__(self, seq: int, kind: str) -> None:
        super().__init__(f"the run has ended ({kind}, event {seq}); no event is added after it")
        self.seq = seq
        self.kind = kind


def append_event(
    conversation: Conversation,
    *,
    kind: str,
    payload: dict[str, Any] | None = None,
    created_at: datetime | None = None,
) -> AgentEvent:
    """Save the run's next event (sequence numbers 1, 2, 3 ... without gaps). Once the run's
    last event is its end (finished, failed, cancelled) nothing more is appended: RunEnded (a
    worker paused past the heartbeat must not add to a run the sweep has failed)."""
    from assessments.timeline import TERMINAL_KINDS

    with transaction.atomic():
        _lock(conversation)
        newest = conversation.events.order_by("-seq").only("seq", "kind").first()
        if newest is not None and newest.kind in TERMINAL_KINDS:
            raise RunEnded(newest.seq, newest.kind)
        last = newest.seq if newest is not None else 0
        return AgentEvent.objects.create(
            conversation=conversation,
            seq=last + 1,
            kind=kind,
            payload=finite(payload or {}),
            created_at=created_at or timezone.now(),
        )


# ---- assessments: start, cancel, life cycle, the run's API token, stale runs -----------------

logger = logging.getLogger(__name__)

RUN_GROUP_PREFIX = "run-"
# Ten simultaneous clicks meet in the unique constraint; a few tries settle who won.
_START_ATTEMPTS = 5


def run_group(conversation_id: uuid.UUID | str) -> str:
    """The channel group a run's events are published to."""
    return f"{RUN_GROUP_PREFIX}{conversation_id}"


def current_traceparent() -> str:
    """The W3C traceparent of the active span (the web request's), or "" outside a trace."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent", "")


def start_assessment(
    release: Release,
    user: AbstractBaseUser | None,
    *,
    provider: str | None = None,
    model: str | None = None,
    enqueue: Callable[[uuid.UUID, str], None] | None = None,
    asked_by: str = "",
    forced: bool = False,
) -> Conversation:
    """The release's queued or running assessment, or a new one, queued for the worker.

    A new run records the hash of the data it starts on (`data_fingerprint`: what
    `assess_unless_unchanged` compares), who asked (`asked_by`: a user, a token, a command)
    and whether it was asked for although the data had not changed (`forced`).

    At most one run per release is active (the `one_active_conversation_per_release`
    constraint): a second request, or ten at once, get the run that is already there.
    `enqueue(run id, traceparent)` (`assessments.tasks.enqueue_assessment`) is called once the run
    is committed, with the current trace context, so that the worker's spans continue the trace
    of the request that asked for the run. Without it the caller runs it at once itself
    (`manage.py assess`), so no worker is asked to.
    """
    traceparent = current_traceparent()
    for _ in range(_START_ATTEMPTS):
        active = Conversation.objects.filter(release=release, status__in=RunStatus.active())
        try:
            with transaction.atomic():
                existing = active.first()
                if existing is not None:
                    return existing
                run = Conversation.objects.create(
                    release=release,
                    status=RunStatus.QUEUED,
                    triggered_by=user if user is not None and user.is_authenticated else None,
                    provider=provider or "",
                    model=model or "",
                    trace_id=traceparent.split("-")[1] if traceparent else "",
                    metadata=data_fingerprint.run_metadata(
                        release, user, traceparent, asked_by, forced
                    ),
                )
                if enqueue is not None:
                    transaction.on_commit(partial(enqueue, run.pk, traceparent))
                return run
        except IntegrityError:
            continue  # another request created it in between: join that one
    raise RuntimeError(f"Could not start or join an assessment of {release.version}")


def record_task(conversation_id: uuid.UUID, task_id: str) -> None:
    """The task row that runs the run: a run whose worker died is failed by it."""
    Conversation.objects.filter(pk=conversation_id).update(task_id=task_id)


def cancel_assessment(conversation: Conversation) -> Conversation:
    """Ask a run to stop. A queued run is cancelled at once; a running one is stopped by its
    worker, which checks the flag with each heartbeat (about once a second) and ends the run
    as cancelled, keeping what it had done. A finished run stays as it is."""
    now = timezone.now()
    event: AgentEvent | None = None
    with transaction.atomic():
        run = Conversation.objects.select_for_update().get(pk=conversation.pk)
        if run.status == RunStatus.QUEUED:
            run.status = RunStatus.CANCELLED
            run.cancel_requested_at = run.finished_at = now
            run.save(update_fields=["status", "cancel_requested_at", "finished_at"])
            event = append_event(
                run, kind="run_cancelled", payload=_terminal_payload("run_cancelled", now)
            )
        elif run.status == RunStatus.RUNNING and run.cancel_requested_at is None:
            run.cancel_requested_at = now
            run.save(update_fields=["cancel_requested_at"])
    if event is not None:
        transaction.on_commit(partial(publish_event, event))
    return run


def mark_running(conversation_id: uuid.UUID | str) -> Conversation | None:
    """Claim a queued run for this worker; None when it is no longer queued (cancelled)."""
    now = timezone.now()
    claimed = Conversation.objects.filter(pk=conversation_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=now, heartbeat_at=now
    )
    return Conversation.objects.get(pk=conversation_id) if claimed else None


class Pulse(enum.Enum):
    """What a heartbeat learnt: go on, stop (Cancel was pressed), or the run is not ours any
    more (the sweep gave it up, or it was cancelled while queued)."""

    GO_ON = "go on"
    CANCEL = "cancel"
    GONE = "gone"


def heartbeat(conversation_id: uuid.UUID | str) -> Pulse:
    """The worker's sign of life; tells it whether Cancel was pressed."""
    alive = Conversation.objects.filter(pk=conversation_id, status=RunStatus.RUNNING).update(
        heartbeat_at=timezone.now()
    )
    if not alive:
        return Pulse.GONE
    cancel = (
        Conversation.objects.filter(pk=conversation_id)
        .values_list("cancel_requested_at", flat=True)
        .first()
    )
    return Pulse.CANCEL if cancel is not None else Pulse.GO_ON


def finish_run(
    conversation_id: uuid.UUID | str,
    *,
    status: RunStatus | str,
    error: str = "",
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    estimated_cost: Decimal | None = None,
    outcome: str = "",
    outcome_detail: str = "",
) -> bool:
    """Record how a running run ended; False if it had already been ended by someone else
    (the sweep), whose verdict stands. The run's API token stops working here."""
    fields: dict[str, Any] = {
        "status": status,
        "error": error,
        "finished_at": timezone.now(),
        "api_token_hash": "",
        "outcome": outcome,
        "outcome_detail": outcome_detail,
    }
    if input_tokens is not None:
        fields["input_tokens"] = input_tokens
    if output_tokens is not None:
        fields["output_tokens"] = output_tokens
    if estimated_cost is not None:
        fields["estimated_cost"] = estimated_cost
    return bool(
        Conversation.objects.filter(pk=conversation_id, status=RunStatus.RUNNING).update(**fields)
    )


def issue_run_token(conversation_id: uuid.UUID | str) -> str:
    """A new random API token for a run's tools. Only its hash is kept; it works while the run
    is active, for the run's release alone (see `selectors.run_for_api_token`)."""
    token = secrets.token_urlsafe(32)
    Conversation.objects.filter(pk=conversation_id).update(api_token_hash=hash_token(token))
    return token


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def fail_stale_runs(now: datetime | None = None) -> list[Conversation]:
    """Mark failed, with the reason, every run whose worker stopped answering.

    - running, and no heartbeat for DETECTIVE_RUN_STALE_SECONDS: the worker died (killed,
      out of memory, the machine restarted);
    - queued, older than that, and its task was taken by a worker that never started it, or
      ended, or was never enqueued.
    A worker runs this every few seconds (`manage.py run_worker`), and the run page checks its
    own run, so a run never stays "running" for ever even with no worker left.
    """
    now = now or timezone.now()
    failed = fail_orphaned_runs(now)
    cutoff = now - timedelta(seconds=settings.DETECTIVE_RUN_STALE_SECONDS)
    running = Conversation.objects.filter(status=RunStatus.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )
    failed += [run for run in running if _fail_if_stale(run, now, cutoff)]
    for run in Conversation.objects.filter(status=RunStatus.QUEUED, created_at__lt=cutoff):
        reason = _lost_task(run, cutoff)
        if reason and _fail(run, RunStatus.QUEUED, reason, now):
            failed.append(run)
    return failed


def fail_orphaned_runs(now: datetime | None = None) -> list[Conversation]:
    """Mark failed at once every running run whose worker ran on this machine and is gone
    (killed, crashed): no need to wait for its heartbeat to go stale. `up` does this before
    anything else, a worker when it starts, and the sweep with the stale runs."""
    from django_tasks_db.models import DBTaskResult

    now = now or timezone.now()
    running = list(Conversation.objects.filter(status=RunStatus.RUNNING).exclude(task_id=""))
    if not running:
        return []
    claimed = {
        str(pk): worker_ids
        for pk, worker_ids in DBTaskResult.objects.filter(
            pk__in=[run.task_id for run in running]
        ).values_list("pk", "worker_ids")
    }
    failed = []
    for run in running:
        worker_ids = claimed.get(str(run.task_id)) or []
        pid = workers.gone(worker_ids[-1]) if worker_ids else None
        if pid is None:
            continue
        reason = (
            f"The worker running it (pid {pid}) stopped: it was killed or crashed, so the run "
            "was marked failed. Reassess to try again."
        )
        if _fail(run, RunStatus.RUNNING, reason, now):
            failed.append(run)
    return failed


def fail_if_stale(conversation: Conversation) -> bool:
    """`fail_stale_runs` for one run (the run page checks its own run on load)."""
    if not conversation.is_active:
        return False
    return any(run.pk == conversation.pk for run in fail_stale_runs())


def _fail_if_stale(run: Conversation, now: datetime, cutoff: datetime) -> bool:
    seen = run.heartbeat_at or run.started_at
    moment = timezone.localtime(seen).strftime("%Y-%m-%d %H:%M:%S %Z") if seen else "start"
    reason = (
        f"The worker stopped responding at {moment} (no heartbeat for "
        f"{settings.DETECTIVE_RUN_STALE_SECONDS:g} s), so the run was marked failed. "
        "Reassess to try again."
    )
    return _fail(run, RunStatus.RUNNING, reason, now, heartbeat_at=run.heartbeat_at)


def _lost_task(run: Conversation, cutoff: datetime) -> str:
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    if not run.task_id:
        return "The run was never handed to a worker (queuing its task failed)."
    task = DBTaskResult.objects.filter(pk=run.task_id).first()
    if task is None or task.status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED):
        return "The worker's task ended without starting the run."
    if task.status == TaskResultStatus.RUNNING and (task.started_at or cutoff) < cutoff:
        return "The worker took the run but stopped responding before starting it."
    return ""


def _fail(
    run: Conversation,
    expected: str,
    reason: str,
    now: datetime,
    **unchanged: Any,
) -> bool:
    with transaction.atomic():
        # Only if nobody changed it meanwhile: a late heartbeat means the worker lives.
        updated = Conversation.objects.filter(pk=run.pk, status=expected, **unchanged).update(
            status=RunStatus.FAILED,
            error=reason,
            finished_at=now,
            api_token_hash="",
            outcome="no_report",
            outcome_detail="the run stopped before the model filed anything",
        )
        if not updated:
            return False
        _fail_task(run, reason, now)
        event = append_event(
            run,
            kind="run_failed",
            payload=_terminal_payload("run_failed", now, error_type="WorkerLost", message=reason),
        )
    logger.warning("run %s failed: %s", run.pk, reason)
    publish_event(event)
    return True


def _fail_task(run: Conversation, reason: str, now: datetime) -> None:
    """The run's task row agrees with the run: a task whose run failed is failed too, and no
    worker picks a queued one up later."""
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    if not run.task_id:
        return
    DBTaskResult.objects.filter(
        pk=run.task_id, status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING]
    ).update(
        status=TaskResultStatus.FAILED,
        finished_at=now,
        exception_class_path="releases.services.WorkerLost",
        traceback=reason,
    )


def _terminal_payload(kind: str, now: datetime, **fields: Any) -> dict[str, Any]:
    """A terminal event in the agent's JSON shape, for endings the agent did not see."""
    base: dict[str, Any] = {"kind": kind, "timestamp": now.isoformat(), "steps": 0}
    if kind == "run_cancelled":
        base["reason"] = "cancelled before it started"
    return {**base, **fields}


def publish_event(event: AgentEvent) -> None:
    """Send a saved event to the pages watching its run (as the HTML they swap in).

    Called after the event is committed: a page that misses the message (not connected yet,
    or the channel layer is down) gets the event from the database when it (re)connects.
    """
    from assessments.timeline import TERMINAL_KINDS, render_live

    try:
        html = render_live([event])  # reads the run's earlier events for some kinds
    except (OperationalError, InterfaceError):
        # The database restarting after the event was saved: the pages read it from there
        # once it is back. (Raising would make the runner save the event again.)
        return
    message = {
        "type": "run.event",
        "seq": event.seq,
        "html": html,
        "terminal": event.kind in TERMINAL_KINDS,
    }
    # A layer that is down costs the run nothing but the live delivery (assessments.layer_health).
    layer_health.publish(run_group(event.conversation_id), message)


# ---- review: a person's decision on a report, and its label as an eval scenario ---------------

REASON_MAX_LENGTH = 2000


class ReviewError(ValueError):
    """A decision that cannot be recorded; the message says why, for the reviewer."""


def decide_report(
    report: RiskReport,
    reviewer: AbstractBaseUser | None,
    *,
    decision: str,
    severity: str = "",
    reason: str = "",
    wrong_finding: str = "",
) -> ReviewDecision:
    """Record a person's decision: accept the model's or the policy's severity (one click
    either way), or override both with a third severity and a reason. An override to the
    policy's severity is accepting it, and needs no reason.

    The report itself is never changed: the model's and the policy's verdicts stay as filed,
    and the newest decision is the one the lists show."""
    reason = reason.strip()
    if len(reason) > REASON_MAX_LENGTH:
        raise ReviewError(f"The reason is longer than {REASON_MAX_LENGTH} characters.")
    if wrong_finding and wrong_finding not in (report.findings or []):
        raise ReviewError("The finding labelled wrong is not one of the report's findings.")
    offered = [s for s in (report.severity, report.policy_severity) if s]
    if decision == ReviewDecision.Kind.OVERRIDE and severity in offered:
        if severity == report.severity:
            raise ReviewError(
                f"The model already says {severity}: accept it, or choose another severity."
            )
        decision = ReviewDecision.Kind.ACCEPT  # siding with the policy is accepting its verdict
    if decision == ReviewDecision.Kind.ACCEPT:
        severity = severity or report.severity
        if severity not in offered:
            raise ReviewError(
                f"Accept the model's {report.severity} or the policy's "
                f"{report.policy_severity or 'verdict'}; {severity or 'another severity'} is an "
                "override, with a reason."
            )
    elif decision == ReviewDecision.Kind.OVERRIDE:
        if severity not in Severity.values:
            raise ReviewError("Choose the severity the release should have.")
        if not reason:
            raise ReviewError("Say why: an override needs a reason.")
    else:
        raise ReviewError("Accept the report or override it.")
    recorded = ReviewDecision.objects.create(
        report=report,
        reviewer=reviewer if reviewer is not None and reviewer.is_authenticated else None,
        decision=decision,
        severity=severity,
        reason=reason,
        wrong_finding=wrong_finding,
        model_severity=report.severity,
        policy_severity=report.policy_severity,
    )
    signals.send_on_commit(signals.verdict_decided, ReviewDecision, decision=recorded)
    return recorded


def review_label(decision: ReviewDecision) -> Label:
    report = decision.report
    release = report.release
    return Label(
        decision_id=decision.pk,
        version=release.version,
        title=release.title,
        changes=release.changes,
        test_results=release.test_results,
        deployment_metrics=release.deployment_metrics,
        decided_severity=decision.severity,
        model_severity=decision.model_severity,
        policy_severity=decision.policy_severity,
        overridden=decision.is_override,
        reason=decision.reason,
        wrong_finding=decision.wrong_finding,
        reviewer=decision.reviewer.get_username() if decision.reviewer else "",
    )


def scenario_toml(decision: ReviewDecision) -> str:
    """The decision as a scenario file, validated by the eval suite's loader first."""
    from review.scenario import scenario, scenario_data

    label = review_label(decision)
    scenario(label)  # raises ScenarioRejected: never write a file run_evals would refuse
    return to_toml(scenario_data(label))


def review_scenarios_dir() -> Path:
    return Path(settings.DETECTIVE_REVIEW_SCENARIOS_DIR)


def export_scenario(decision: ReviewDecision, directory: Path | None = None) -> Path:
    """Write the decision as an eval scenario into the review scenarios directory (settings
    DETECTIVE_REVIEW_SCENARIOS_DIR), where `run_evals` picks it up. Exporting again rewrites
    the same file."""
    if decision.severity == decision.model_severity and not decision.wrong_finding:
        raise ReviewError(
            "Only a decision against the model's severity (an override, or accepting the "
            "policy's) or a finding labelled wrong teaches the suite something."
        )
    target = Path(directory or review_scenarios_dir())
    target.mkdir(parents=True, exist_ok=True)
    name = scenario_id(review_label(decision))
    path = target / f"{name}.toml"
    text = scenario_toml(decision)
    # Written whole, then renamed: a loader never reads half a file.
    partial_path = path.with_suffix(".toml.part")
    partial_path.write_text(text, encoding="utf-8")
    partial_path.replace(path)
    if decision.scenario_id != name:
        decision.scenario_id = name
        decision.save(update_fields=["scenario_id"])
    return path


def note_pipeline_waiting(report_id: int) -> datetime | None:
    """A pipeline waits for a person's decision on this report: since when (the first wait's
    time stands, so a re-run job does not look newer than it is). None when the report is
    gone."""
    now = timezone.now()
    RiskReport.objects.filter(pk=report_id, pipeline_waiting_since__isnull=True).update(
        pipeline_waiting_since=now
    )
    return (
        RiskReport.objects.filter(pk=report_id)
        .values_list("pipeline_waiting_since", flat=True)
        .first()
    )
