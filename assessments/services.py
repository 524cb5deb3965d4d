"""A run's writes: its messages and events, its start, cancel and life cycle, its API token,
and the failing of runs whose worker is gone. The views, commands, the task and the agent's seam
(runner/) change a run only through here."""

from __future__ import annotations

import enum
import logging
import secrets
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import Max, Q
from django.utils import timezone
from opentelemetry import propagate

from assessments import layer_health, workers
from releases import data_fingerprint
from releases.models import (
    AgentEvent,
    Conversation,
    Message,
    Release,
    RunStatus,
)
from releases.services import hash_token
from releases.stored_data import finite
from releases.stored_verdict import refresh_stored_verdict


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
    with transaction.atomic():
        claimed = Conversation.objects.filter(pk=conversation_id, status=RunStatus.QUEUED).update(
            status=RunStatus.RUNNING, started_at=now, heartbeat_at=now
        )
        run = (
            Conversation.objects.select_related("release").get(pk=conversation_id)
            if claimed
            else None
        )
        if run is not None:
            if run.release is not None and data_fingerprint.of_run(run) is not None:
                # The data it starts on, not the data it was queued on: a shard that came in
                # while it waited is read by it, so it does not make the run stale.
                run.metadata = {
                    **(run.metadata or {}),
                    data_fingerprint.METADATA_KEY: data_fingerprint.fingerprint(run.release),
                }
                run.save(update_fields=["metadata"])
            refresh_stored_verdict(run.release_id)
    return run


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
    follow_up: Callable[[uuid.UUID, str], None] | None = None,
) -> bool:
    """Record how a running run ended; False if it had already been ended by someone else
    (the sweep), whose verdict stands. The run's API token stops working here.

    With `follow_up` (the worker's enqueue), a run whose release got new data while it ran is
    marked stale and a new assessment of all the data is queued in the same transaction
    (`_reassess_if_data_changed`), so nobody ever reads the stale report as the verdict."""
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
    with transaction.atomic():
        ended = Conversation.objects.filter(pk=conversation_id, status=RunStatus.RUNNING)
        if not ended.update(**fields):
            return False
        if follow_up is not None and status != RunStatus.CANCELLED:
            _reassess_if_data_changed(conversation_id, follow_up)
        refresh_stored_verdict(
            Conversation.objects.filter(pk=conversation_id)
            .values_list("release_id", flat=True)
            .first()
        )
    return True


STALE_KEY = "stale"
STALE_DETAIL = "new data arrived while it ran: reassessed on all the data"


def _reassess_if_data_changed(
    conversation_id: uuid.UUID | str, enqueue: Callable[[uuid.UUID, str], None]
) -> Conversation | None:
    """A JUnit shard, metrics or commits that arrived while the run ran: its report judged
    part of the data, so it is not the verdict. The run is marked stale (its metadata names
    the run that follows) and a new one is queued on all the data; it is the latest run, so
    the release reads as being assessed and a waiting job waits for that one's verdict. A run
    that stored no report, or whose data is unchanged, is left as it is."""
    from releases.models import RiskReport

    run = Conversation.objects.select_related("release").get(pk=conversation_id)
    release = run.release
    recorded = data_fingerprint.of_run(run)
    if release is None or recorded is None:
        return None
    if recorded == data_fingerprint.fingerprint(release):
        return None
    if not RiskReport.objects.filter(conversation=run).exists():
        return None
    follow = start_assessment(
        release,
        None,
        provider=run.provider or None,
        model=run.model or None,
        enqueue=enqueue,
        asked_by=f"new data during run {run.pk}",
    )
    run.metadata = {**(run.metadata or {}), STALE_KEY: {"followed_by": str(follow.pk)}}
    run.outcome_detail = "; ".join(part for part in (run.outcome_detail, STALE_DETAIL) if part)
    run.save(update_fields=["metadata", "outcome_detail"])
    logger.info("run %s: %s (run %s)", run.pk, STALE_DETAIL, follow.pk)
    return follow


def issue_run_token(conversation_id: uuid.UUID | str) -> str:
    """A new random API token for a run's tools. Only its hash is kept; it works while the run
    is active, for the run's release alone (see `selectors.run_for_api_token`)."""
    token = secrets.token_urlsafe(32)
    Conversation.objects.filter(pk=conversation_id).update(api_token_hash=hash_token(token))
    return token


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
        refresh_stored_verdict(run.release_id)
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
        exception_class_path="assessments.services.WorkerLost",
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
