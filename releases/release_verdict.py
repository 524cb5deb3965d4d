"""A release's verdict as one value: what the pages, the API, the `verdict` command and the
webhooks read (`selectors.release_verdict` is the door to it).

The severity that counts follows the one rule of `releases/severity.py`. The state says where
the release stands:

- `not_assessed`: no report and no run that ended badly;
- `running`: an assessment is queued or running (the severity is the previous report's, if any);
- `failed`: the latest run failed or was cancelled after the latest report (or with none);
- `needs_person`: the latest report waits for a person's decision;
- `decided`: a person decided on the latest report;
- `assessed`: the latest report stands as filed.

When no model has filed a report on the data the release has now (none configured or
reachable, the run failed or has not run yet, or new data came after the report), the severity
that counts is the policy's own (`by_policy`, "the policy's verdict (no model assessment)"),
with its evidence and suspects; the state still says where the assessment stands.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from releases import data_fingerprint, policy_judge
from releases.missing_data import rests_on_missing_data
from releases.models import Conversation, Release, ReviewDecision, RiskReport, RunStatus
from releases.severity import severity_that_counts
from risk import headline
from risk.run_counts import results_said


class VerdictState(enum.StrEnum):
    NOT_ASSESSED = "not_assessed"
    RUNNING = "running"
    ASSESSED = "assessed"
    NEEDS_PERSON = "needs_person"
    DECIDED = "decided"
    FAILED = "failed"


STATE_LABELS: dict[str, str] = {
    VerdictState.NOT_ASSESSED: "Not assessed",
    VerdictState.RUNNING: "Being assessed",
    VerdictState.ASSESSED: "Assessed",
    VerdictState.NEEDS_PERSON: "Waits for a person",
    VerdictState.DECIDED: "Decided by a person",
    VerdictState.FAILED: "Assessment failed",
}
POLICY_SOURCE_LABEL = "the policy's verdict (no model assessment)"


@dataclass(frozen=True)
class VerdictFinding:
    text: str
    evidence: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    # The policy's sentence, added because the model's findings left it out (issue 30).
    from_policy: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "evidence": list(self.evidence),
            "problems": list(self.problems),
            "from_policy": self.from_policy,
        }


@dataclass(frozen=True)
class ReleaseVerdict:
    version: str
    state: VerdictState
    severity: str | None  # the severity that counts; None: no report
    model_severity: str | None = None
    policy_severity: str | None = None
    policy_version: int | None = None
    decision_kind: str | None = None  # "accept" or "override"
    decided_severity: str | None = None
    decided_by: str = ""
    decision_reason: str = ""
    findings: tuple[VerdictFinding, ...] = ()
    summary: str = ""
    review_reasons: tuple[str, ...] = ()
    # The first suspect commit of each new failure, as the policy's evidence said it.
    suspects: tuple[str, ...] = ()
    # The test results in pytest's terms, tests and subtests apart, and how much of the usual
    # suite ran when it did not all run (risk/run_counts.py): "" without results.
    tests: str = ""
    report_id: int | None = None
    report_filed_at: datetime | None = None
    run_id: str | None = None  # the latest run's
    run_status: str | None = None
    run_error: str = ""
    # The severity is the policy's own: no model filed on the data the release has now.
    by_policy: bool = False
    # A medium that rests on missing fields alone (`missing_data.py`): what
    # `--fail-on medium-known` lets pass.
    missing_data_only: bool = False
    # Why this severity, in one sentence (a CI summary's headline; `why_of`).
    why: str = ""

    @property
    def state_label(self) -> str:
        return STATE_LABELS[self.state]

    @property
    def source(self) -> str | None:
        """Whose severity counts: "policy", "person", "model", or None (no verdict)."""
        if self.by_policy:
            return "policy"
        if self.severity is None:
            return None
        return "person" if self.decision_kind else "model"

    def as_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "state": str(self.state),
            "state_label": self.state_label,
            "severity": self.severity,
            "source": self.source,
            "source_label": POLICY_SOURCE_LABEL if self.by_policy else "",
            "model_severity": self.model_severity,
            "policy_severity": self.policy_severity,
            "policy_version": self.policy_version,
            "decision": (
                {
                    "kind": self.decision_kind,
                    "severity": self.decided_severity,
                    "by": self.decided_by,
                    "reason": self.decision_reason,
                }
                if self.decision_kind
                else None
            ),
            "findings": [finding.as_json() for finding in self.findings],
            "summary": self.summary,
            "review_reasons": list(self.review_reasons),
            "suspects": list(self.suspects),
            "tests": self.tests,
            "report_id": self.report_id,
            "report_filed_at": self.report_filed_at.isoformat() if self.report_filed_at else None,
            "run_id": self.run_id,
            "missing_data_only": self.missing_data_only,
            "run_status": self.run_status,
            "run_error": self.run_error,
            "why": self.why,
        }


# Where one failure's sentence ends in the suspects' signal (risk/suspect_signals.py): each
# starts with the test's name and "fails".
_NEXT_SUSPECT = re.compile(r"; (?=(?:\S+ fails[ ;,])|(?:and \d+ more with suspects$))")


def suspects_said(signals: Any) -> tuple[str, ...]:
    """The policy's sentence on each new failure's first suspect, from the report's signals."""
    for signal in signals if isinstance(signals, list) else []:
        if isinstance(signal, dict) and signal.get("name") == "failure_suspects":
            return tuple(_NEXT_SUSPECT.split(str(signal.get("detail") or "")))
    return ()


def findings_with_evidence(report: RiskReport) -> tuple[VerdictFinding, ...]:
    """Each finding with the evidence and the problems the grounding found for it."""
    by_text: dict[str, dict[str, Any]] = {}
    for part in report.grounding or []:
        if isinstance(part, dict) and part.get("where") != "summary":
            by_text.setdefault(str(part.get("text", "")), part)
    added = set(report.policy_findings or [])
    found = []
    for text in report.findings or []:
        part = by_text.get(text) or {}
        found.append(
            VerdictFinding(
                text=text,
                evidence=tuple(str(e) for e in part.get("evidence") or []),
                problems=tuple(str(p) for p in part.get("problems") or []),
                from_policy=text in added,
            )
        )
    return tuple(found)


def state_of(
    report: RiskReport | None, decision: ReviewDecision | None, run: Conversation | None
) -> VerdictState:
    if run is not None and run.is_active:
        return VerdictState.RUNNING
    # A run that ended badly after the latest report (or with none): its verdict is missing.
    if (
        run is not None
        and run.status in (RunStatus.FAILED, RunStatus.CANCELLED)
        and (report is None or run.created_at > report.filed_at)
    ):
        return VerdictState.FAILED
    if report is None:
        return VerdictState.NOT_ASSESSED
    if decision is not None:
        return VerdictState.DECIDED
    if report.needs_review:
        return VerdictState.NEEDS_PERSON
    return VerdictState.ASSESSED


def verdict_of(release: Release) -> ReleaseVerdict:
    """The release's verdict as the gate goes by it: the recorded one, or the policy's where
    no model filed on the data the release has now."""
    recorded, report = _recorded(release)
    return gate_verdict(release, report, recorded)


def recorded_verdict(release: Release) -> ReleaseVerdict:
    """The verdict of the reports, decisions and runs alone (what the lists store and sort
    by, `stored_verdict.py`): three queries."""
    return _recorded(release)[0]


def _recorded(release: Release) -> tuple[ReleaseVerdict, RiskReport | None]:
    """Three queries: the latest report with its policy, its latest decision, the latest run."""
    report = (
        RiskReport.objects.filter(release=release)
        .select_related("policy", "conversation")
        .order_by("-filed_at", "-id")
        .first()
    )
    decision = (
        ReviewDecision.objects.filter(report=report)
        .select_related("reviewer")
        .order_by("-created_at", "-id")
        .first()
        if report is not None
        else None
    )
    run = Conversation.objects.filter(release=release).order_by("-created_at", "-pk").first()
    return build_verdict(release, report, decision, run), report


def gate_verdict(
    release: Release, report: RiskReport | None, verdict: ReleaseVerdict
) -> ReleaseVerdict:
    """The verdict the gate goes by: the one built from the rows, or the policy's where no
    model filed on the data the release has now."""
    if no_model_on_current_data(verdict, report, release):
        return with_policy_verdict(verdict, release)
    return verdict


def no_model_on_current_data(
    verdict: ReleaseVerdict, report: RiskReport | None, release: Release
) -> bool:
    """No report judged the data the release has now, and no person decided on one: the
    policy's verdict is the gate's. A report waiting for a person, or decided, stands."""
    if verdict.state in (VerdictState.NEEDS_PERSON, VerdictState.DECIDED):
        return False
    return report is None or not data_fingerprint.report_is_current(report, release)


def with_policy_verdict(verdict: ReleaseVerdict, release: Release) -> ReleaseVerdict:
    """The verdict with the policy's severity, evidence and suspects, on the data now."""
    judged = policy_judge.judge(release)
    policy = judged.verdict
    return replace(
        verdict,
        severity=policy.severity,
        policy_severity=policy.severity,
        policy_version=judged.policy.version,
        findings=tuple(VerdictFinding(text=text, from_policy=True) for text in policy.evidence()),
        suspects=suspects_said([signal.as_dict() for signal in policy.signals]),
        tests=results_said(
            release.test_results or {}, judged.history.earlier_test_counts, judged.settings
        ),
        by_policy=True,
        missing_data_only=rests_on_missing_data(
            policy.severity, [signal.as_dict() for signal in policy.signals]
        ),
        why=headline.why([signal.as_dict() for signal in policy.signals], policy.severity),
    )


def why_of(
    report: RiskReport, decision: ReviewDecision | None, severity: str | None, by: str
) -> str:
    """Why the severity that counts is what it is: a person's decision, the reason a person
    must look, the policy's signals that set it, or the model's going above the policy."""
    if decision is not None:
        reason = f": {decision.reason}" if decision.reason else ""
        return f"{by or 'A person'} decided {str(decision.severity).capitalize()}{reason}"
    if report.needs_review and report.review_reasons:
        # A reason goes on with the evidence after its first colon: the findings say it.
        reason = str(report.review_reasons[0]).split(": ", 1)[0]
        policy = headline.why(report.signals or [], report.policy_severity)
        return f"A person must decide ({reason}): {policy[:1].lower()}{policy[1:]}".rstrip(": ")
    if severity != report.policy_severity and report.policy_severity:
        return (
            f"The model filed {severity}, above the policy's {report.policy_severity}: "
            "see its findings."
        )
    return headline.why(report.signals or [], severity)


def build_verdict(
    release: Release,
    report: RiskReport | None,
    decision: ReviewDecision | None,
    run: Conversation | None,
) -> ReleaseVerdict:
    state = state_of(report, decision, run)
    run_fields: dict[str, Any] = {
        "run_id": str(run.pk) if run is not None else None,
        "run_status": run.status if run is not None else None,
        "run_error": run.error if run is not None else "",
    }
    # The results alone: the usual count needs the history, which the policy's verdict reads
    # (`with_policy_verdict`) and a filed report's signals said when it was filed.
    run_fields["tests"] = results_said(release.test_results or {})
    if report is None:
        return ReleaseVerdict(version=release.version, state=state, severity=None, **run_fields)
    severity = severity_that_counts(
        filed=report.severity,
        policy=report.policy_severity,
        needs_review=report.needs_review,
        decided=decision.severity if decision is not None else None,
    )
    decided_by = (
        decision.reviewer.get_username()
        if decision is not None and decision.reviewer is not None
        else ""
    )
    return ReleaseVerdict(
        version=release.version,
        state=state,
        severity=severity,
        missing_data_only=decision is None
        and rests_on_missing_data(severity, report.signals or []),
        model_severity=report.severity,
        policy_severity=report.policy_severity or None,
        policy_version=report.policy.version if report.policy is not None else None,
        decision_kind=decision.decision if decision is not None else None,
        decided_severity=decision.severity if decision is not None else None,
        decided_by=decided_by,
        decision_reason=decision.reason if decision is not None else "",
        findings=findings_with_evidence(report),
        summary=report.summary,
        review_reasons=tuple(report.review_reasons or []) if report.needs_review else (),
        suspects=suspects_said(report.signals),
        report_id=report.pk,
        report_filed_at=report.filed_at,
        why=why_of(report, decision, severity, decided_by),
        **run_fields,
    )
