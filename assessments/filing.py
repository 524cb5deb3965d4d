"""Filing a run's risk report: checked against the policy and the data (`file_checked_report`,
what the API's `POST /api/risk-reports` calls), or stored as it is (`file_risk_report`, for the
outcome a run ends with and the demo), always beside the policy's own verdict on the release.

Here, not in releases: the policy's verdict on a stored release weighs its history, which the
sources app keeps (`sources.judging.judge_release`), and sources stands below assessments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from releases import signals, verdicts
from releases.models import (
    Conversation,
    Release,
    ReportOrigin,
    RiskReport,
    Severity,
)
from releases.verdicts import Judged
from risk import filing
from risk.carried import with_policy_parts
from risk.figures import numbers_in
from risk.filing import FilingDecision
from sources import judging


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
    judged = judged or judging.judge_release(release)
    if decision is not None:
        # Never a bare "E17", an empty item or a repeat (issue 40): the decision says why.
        findings = decision.kept
    # What the model left out of the policy's evidence ends the findings, marked as the
    # policy's (issue 30: the model adds, never subtracts).
    added = [s for s in decision.from_policy if s not in findings] if decision else []
    if decision is not None and not findings and not added:
        added = [
            f"The risk policy (v{judged.policy.version}) found no signal of risk in the "
            "release data."
        ]
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
    with transaction.atomic():  # the report and the release's stored verdict, together
        report.save()
    signals.send_on_commit(signals.verdict_filed, RiskReport, report=report)
    return report


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
    judged = judging.judge_release(release)
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
