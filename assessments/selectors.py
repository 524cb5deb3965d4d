"""A run's reads: its page, the websocket's replay, what it filed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from releases import eval_hooks
from releases.eval_hooks import TrialVerdict
from releases.models import AgentEvent, Conversation, Message, ReviewDecision, RiskReport
from releases.selectors import newest_decisions, reports_with_severity_shown, review_reasons

VIEW_RUNS = ("releases.view_conversation", "releases.run_assessment")


def can_view_run(user: Any, run: Conversation) -> bool:
    """Whoever may see or run assessments (the Release managers) and whoever started this run;
    the staff flag alone grants nothing (it opens the admin)."""
    if not user.is_authenticated or not user.is_active:
        return False
    if any(user.has_perm(permission) for permission in VIEW_RUNS):
        return True
    return run.triggered_by_id is not None and run.triggered_by_id == user.pk


def run_with_release(pk: Any) -> Conversation | None:
    return (
        Conversation.objects.select_related("release__service", "triggered_by")
        .filter(pk=pk)
        .first()
    )


def run_events(run: Conversation | Any, after: int = 0) -> list[AgentEvent]:
    """The run's saved events after sequence number `after`, in order."""
    run_id = run.pk if isinstance(run, Conversation) else run
    return list(AgentEvent.objects.filter(conversation_id=run_id, seq__gt=after).order_by("seq"))


def run_messages(run: Conversation) -> list[Message]:
    """The run's transcript: its messages in order."""
    return list(run.messages.order_by("position"))


@dataclass(frozen=True)
class RunOutcome:
    """What a finished run filed, as its page leads with it."""

    report: RiskReport
    previous_severity: str | None  # the release's report before this one
    decision: ReviewDecision | None  # a person's latest decision on it
    reasons: list[str]  # why it needs a person (empty: it does not)

    @property
    def changed(self) -> bool:
        return self.previous_severity not in (None, self.report.severity)


def run_outcome(run: Conversation) -> RunOutcome | None:
    """The report a run filed (its latest, should there be several), with the release's
    previous verdict and any decision on it: three queries, none without a report."""
    report = (
        reports_with_severity_shown(run.risk_reports.all())
        .select_related("release__service", "policy")
        .order_by("-filed_at", "-id")
        .first()
    )
    if report is None:
        return None
    previous = (
        RiskReport.objects.filter(release_id=report.release_id)
        .filter(Q(filed_at__lt=report.filed_at) | Q(filed_at=report.filed_at, id__lt=report.id))
        .order_by("-filed_at", "-id")
        .values_list("severity", flat=True)
        .first()
    )
    decision = newest_decisions().filter(report=report).first()
    return RunOutcome(report, previous, decision, review_reasons(report, previous))


def eval_trial(run: Conversation) -> TrialVerdict | None:
    """How the eval trial this run was was judged (the evals app says), or None for an
    assessment."""
    return eval_hooks.trial_verdict(run)
