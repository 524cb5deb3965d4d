"""Writes: the verdict an assessment ends with, whatever the model did.

Called by the runner (`assessments/runner/`) when the agent's run ends, before the run's status
is recorded. A run that read its release always leaves a verdict:

- the model filed a report (accepted, or stored for review after a refusal): `filed`;
- the policy refused its filing and the model never filed again: its last refused filing is
  stored as a report that needs a person, with the policy's verdict beside it and the
  refusal's reasons (`kept_refused`);
- it never filed at all (it gave up, its answer was cut off at the output limit, its tool call
  never parsed, it ran out of steps, the provider failed): the policy's verdict is stored as a
  report that needs a person, saying that the model filed nothing and why (`policy_verdict`).

Only a run that could not read its release, or that a person cancelled, stores nothing
(`no_report`), and then it is failed (or cancelled), never succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assessments.filing import REFUSALS_KEY, file_risk_report
from releases.models import (
    AgentEvent,
    AssessmentOutcome,
    Conversation,
    ReportOrigin,
    RiskReport,
    RunStatus,
)
from risk import filing
from sources import judging

SUMMARY_TOOL = "get_release_summary"
NOT_CORRECTED = (
    "The policy refused the model's filing and the model did not file a corrected one: "
    "its refused filing is kept for a person to decide, with the policy's verdict beside it."
)


@dataclass(frozen=True, slots=True)
class Concluded:
    """How the run ends: its status and error, and what it stored."""

    status: str
    error: str
    outcome: str
    detail: str
    report: RiskReport | None = None


def conclude(
    run: Conversation, kind: str, payload: dict[str, Any], status: str, error: str
) -> Concluded:
    """Store the verdict a finished run reached, if the model left none (see the module)."""
    # Read afresh: the refusals were counted on the row while the run went on.
    run = Conversation.objects.select_related("release").get(pk=run.pk)
    release = run.release
    if release is None:  # an eval trial: its scenario is judged elsewhere
        return Concluded(status, error, "", "")
    filed = RiskReport.objects.filter(conversation=run).order_by("-filed_at", "-id").first()
    if filed is not None:
        return Concluded(status, error, AssessmentOutcome.FILED, "", filed)
    if status == RunStatus.CANCELLED:
        return Concluded(status, error, AssessmentOutcome.NO_REPORT, "the run was cancelled")
    why = _why_nothing(kind, payload, error)
    refusals = (run.metadata or {}).get(REFUSALS_KEY) or []
    last = refusals[-1] if refusals and isinstance(refusals[-1], dict) else {}
    if isinstance(last.get("filing"), dict):
        report = _keep_refused(run, last["filing"], why)
        detail = "the model did not correct its filing"
        return Concluded(
            _kept_status(kind, status), error, AssessmentOutcome.KEPT_REFUSED, detail, report
        )
    if _read_release(run):
        report = _policy_verdict(run, why)
        return Concluded(
            _kept_status(kind, status), error, AssessmentOutcome.POLICY_VERDICT, why, report
        )
    detail = _why_unread(run, kind)
    return Concluded(
        RunStatus.FAILED,
        error or f"No report: {detail}.",
        AssessmentOutcome.NO_REPORT,
        detail,
    )


def _kept_status(kind: str, status: str) -> str:
    """A run the model ended (answered, gave up, ran out of steps, was cut off) succeeded once
    its verdict is stored; one that failed (the provider, a bug, the deadline) stays failed."""
    return RunStatus.SUCCEEDED if kind == "run_finished" else status


def _why_nothing(kind: str, payload: dict[str, Any], error: str) -> str:
    reason = payload.get("reason")
    if kind == "run_finished":
        if reason == "output_limit":
            return "its answer was cut off at the output limit"
        if reason == "max_steps":
            return "it used all its steps without filing"
        if reason == "tool_failing":
            return "its filing kept failing"
        return "it answered without filing a report"
    return f"the run failed: {error}" if error else "the run failed"


def _why_unread(run: Conversation, kind: str) -> str:
    asked = AgentEvent.objects.filter(
        conversation=run, kind="tool_call", payload__tool_call__name=SUMMARY_TOOL
    ).exists()
    if asked:
        return "the summary could not be read"
    if kind == "run_failed":
        return "the run failed before the release was read"
    return "the model never read the release"


def _read_release(run: Conversation) -> bool:
    """Whether the run read its release's summary (a successful summary tool result)."""
    for payload in AgentEvent.objects.filter(conversation=run, kind="tool_result").values_list(
        "payload", flat=True
    ):
        result = (payload or {}).get("result") or {}
        if result.get("name") == SUMMARY_TOOL and result.get("success"):
            return True
    return False


def _keep_refused(run: Conversation, refused: dict[str, Any], why: str) -> RiskReport:
    release = run.release
    assert release is not None
    judged = judging.judge_release(release)
    severity = str(refused.get("severity") or judged.verdict.severity)
    findings = [str(f) for f in refused.get("findings") or []] or judged.verdict.evidence()
    summary = str(refused.get("summary") or "")
    decision = filing.decide(
        severity=severity,
        findings=findings,
        summary=summary,
        data=judged.summary,
        verdict=judged.verdict,
        cfg=judged.settings,
        refused_before=True,
        shown=judged.for_agent(),
    )
    decision.review_reasons.insert(0, f"{NOT_CORRECTED} (After the refusal, {why}.)")
    return file_risk_report(
        release=release,
        severity=severity,
        findings=findings,
        summary=summary,
        conversation=run,
        judged=judged,
        decision=decision,
        origin=ReportOrigin.REFUSED_FILING,
    )


def _policy_verdict(run: Conversation, why: str) -> RiskReport:
    release = run.release
    assert release is not None
    judged = judging.judge_release(release)
    severity = judged.verdict.severity
    findings = judged.verdict.evidence() or [
        f"The risk policy (v{judged.policy.version}) found no signal of risk in the release data."
    ]
    summary = (
        f"The model filed no report: {why}. This is the risk policy's verdict "
        f"(v{judged.policy.version}), kept for a person to check."
    )
    decision = filing.decide(
        severity=severity,
        findings=findings,
        summary="",
        data=judged.summary,
        verdict=judged.verdict,
        cfg=judged.settings,
        refused_before=True,
        shown=judged.for_agent(),
    )
    decision.review_reasons.insert(
        0, f"The model filed no report ({why}): the policy's verdict is stored in its place."
    )
    return file_risk_report(
        release=release,
        severity=severity,
        findings=findings,
        summary=summary,
        conversation=run,
        judged=judged,
        decision=decision,
        origin=ReportOrigin.POLICY,
    )
