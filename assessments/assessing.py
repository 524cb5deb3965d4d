"""Asking for an assessment from a pipeline or a command: a new run, unless the verdict
stands on the data the release has now (`releases/data_fingerprint.py`).

The page's Reassess button always assesses (`services.start_assessment`); the API's assess
endpoint and `manage.py assess` come here, and assess again on unchanged data only when
forced, which the run records with who asked.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser

from assessments import services
from releases import data_fingerprint
from releases.models import Conversation, Release, RiskReport
from releases.release_verdict import VerdictState, verdict_of


@dataclass(frozen=True)
class AssessOutcome:
    """What asking for an assessment gave: a run (new, or the one already queued or
    running), or the run whose verdict stands when the data has not changed since (`kept`)."""

    run: Conversation
    kept: bool = False
    message: str = ""


KEPT_MESSAGE = (
    "The data has not changed since the verdict of {filed} (same commits, reports and metrics):"
    " the verdict stands{decided}. Ask for a reassessment on purpose with force."
)


def assess_unless_unchanged(
    release: Release,
    user: AbstractBaseUser | None,
    *,
    force: bool = False,
    asked_by: str = "",
    provider: str | None = None,
    model: str | None = None,
    enqueue: Callable[[uuid.UUID, str], None] | None = None,
) -> AssessOutcome:
    """Assess the release, unless its verdict stands on the data it has now: then the run
    that made that verdict is returned, `kept`, and a person's decision on it stays. `force`
    assesses anyway (recorded on the run with who asked)."""
    if not force:
        kept = _standing_run(release)
        if kept is not None:
            return kept
    run = services.start_assessment(
        release, user, provider=provider, model=model, enqueue=enqueue,
        asked_by=asked_by, forced=force,
    )  # fmt: skip
    return AssessOutcome(run=run)


def _standing_run(release: Release) -> AssessOutcome | None:
    verdict = verdict_of(release)
    standing = (VerdictState.ASSESSED, VerdictState.NEEDS_PERSON, VerdictState.DECIDED)
    if verdict.state not in standing or verdict.report_id is None:
        return None
    report = RiskReport.objects.select_related("conversation").get(pk=verdict.report_id)
    run = report.conversation
    recorded = data_fingerprint.of_run(run)
    if run is None or recorded is None or recorded != data_fingerprint.fingerprint(release):
        return None
    decided = ""
    if verdict.state == VerdictState.DECIDED:
        by = verdict.decided_by or "a person"
        how = (
            f"overridden to {verdict.decided_severity}"
            if verdict.decision_kind == "override"
            else f"accepted as {verdict.decided_severity}"
        )
        decided = f", as decided by {by} ({how})"
    message = KEPT_MESSAGE.format(filed=f"{report.filed_at:%Y-%m-%d %H:%M} UTC", decided=decided)
    return AssessOutcome(run=run, kept=True, message=message)
