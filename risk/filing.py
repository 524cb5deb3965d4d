"""The decision on a filed report: accept it, refuse it once with the reasons, or keep it for a
person.

A filing has *problems* when its severity is below the policy's (the floor), when a finding or
the summary is not grounded in the data, when data is missing and nothing says so, or when the
release data addresses the assessor and the report does not mention it. The first time, a
filing with problems is refused with every problem spelled out, so that the model can file
again. The second time (or when the caller has no run to remember the first refusal by) it is
stored with `needs_review`, both verdicts shown. A report on release data that tries to give
orders always needs review. A severity above the floor is accepted with a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from risk.carried import INSTRUCTION_WORDS, MISSING_WORDS, left_out
from risk.digest import evidence_keys
from risk.empty_findings import SortedFindings, showed, sort_findings
from risk.figures import numbers_in
from risk.grounding import ReportGrounding, ground_report
from risk.policy import SEVERITY_RANK, PolicySettings, PolicyVerdict
from risk.signal import INSTRUCTIONS_SIGNAL


@dataclass(slots=True)
class FilingDecision:
    policy_severity: str
    grounding: ReportGrounding
    evidence: list[str] = field(default_factory=list)
    # The policy's sentences a corrected report must add (missing data, orders in the data).
    to_add: list[str] = field(default_factory=list)
    # The policy's evidence no finding (nor the summary) carries (`carried.py`): the stored
    # report adds them, marked as the policy's, so that it never says less than the policy.
    from_policy: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    review_reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refused: bool = False
    below_policy: bool = False
    # The findings with content of their own, which a stored report keeps (never a bare
    # "E17"), and the problems of the others (`empty_findings.py`).
    kept: list[str] = field(default_factory=list)
    sorted_findings: SortedFindings = field(default_factory=SortedFindings)
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def needs_review(self) -> bool:
        return bool(self.review_reasons)

    def refusal_message(self) -> str:
        """What was wrong, then what to file instead. Measured on Qwen2.5-Coder-1.5B: given
        the reasons and the option to insist, it refiled unchanged every time; it acts on a
        concrete correction, the policy's own sentences to copy."""
        problems = "\n".join(f"- {p}" for p in self.problems)
        fixes = []
        if self.below_policy:
            fixes.append(f'severity: "{self.policy_severity}"')
        if self.grounding.problems():
            fixes.append(
                "findings: these sentences of the policy's evidence, copied as they are: "
                + "; ".join(f'"{line}"' for line in self.evidence)
            )
            fixes.append("summary: empty, or only what these sentences say")
        if self.sorted_findings.dropped:
            fixes.append(
                "findings: each a sentence of its own, said once; in the `evidence` of the "
                f"brief report, only these keys, each once: {showed(self.keys)}"
            )
        if self.to_add:
            fixes.append(
                "findings: add these sentences: " + "; ".join(f'"{line}"' for line in self.to_add)
            )
        corrections = "\n".join(f"- {fix}" for fix in fixes)
        return (
            "The risk report was not filed. The release data does not support it:\n"
            f"{problems}\n"
            f"Call file_risk_report again, once, corrected:\n{corrections}"
        )


def _why_floor(verdict: PolicyVerdict) -> str:
    raised = [s for s in verdict.raised() if s.counts_as == verdict.severity]
    return "; ".join(s.detail for s in raised) or "no signal"


def decide(
    *,
    severity: str,
    findings: Sequence[str],
    summary: str,
    data: Mapping[str, Any],
    verdict: PolicyVerdict,
    cfg: PolicySettings | None = None,
    refused_before: bool,
    shown: Mapping[str, Any] | None = None,
    summary_read: bool | None = None,
    investigated: Sequence[float] = (),
) -> FilingDecision:
    """Judge one filing. `refused_before`: this run's filing was refused once already (or
    there is no run to refuse, so the first answer is final). `shown`: what the model was
    shown of the release when it differs from `data` (a compacted change list), whose
    figures count as known too. `summary_read`: whether the run obtained the release summary
    (None when not known). `investigated`: the figures the run's drill-downs showed."""
    cfg = cfg or PolicySettings()
    keys = evidence_keys(verdict)
    sorted_findings = sort_findings(findings, keys)
    # Only what has content of its own is grounded and stored: a bare key is no finding.
    findings = sorted_findings.kept
    extra = numbers_in(dict(shown)) if shown is not None else []
    grounding = ground_report(
        findings,
        summary,
        data,
        verdict,
        cfg,
        extra_known=extra,
        summary_read=summary_read,
        investigated=investigated,
    )
    decision = FilingDecision(
        policy_severity=verdict.severity,
        grounding=grounding,
        evidence=verdict.evidence(),
        kept=list(findings),
        sorted_findings=sorted_findings,
        keys=keys,
    )
    decision.from_policy = left_out(decision.evidence, [*findings, summary])
    text = " ".join([*findings, summary])

    if SEVERITY_RANK[severity] < SEVERITY_RANK[verdict.severity]:
        decision.below_policy = True
        decision.problems.append(
            f"severity {severity} is below the policy's {verdict.severity}: {_why_floor(verdict)}"
        )
    elif SEVERITY_RANK[severity] > SEVERITY_RANK[verdict.severity]:
        decision.notes.append(
            f"The model saw more risk than the policy: it filed {severity}, the policy "
            f"gives {verdict.severity}."
        )
    decision.problems += [f"no content of its own: {p}" for p in sorted_findings.problems]
    decision.problems += [f"not grounded: {p}" for p in grounding.problems()]
    missing = verdict.missing()
    if missing and not MISSING_WORDS.search(text):
        decision.problems.append(
            "data is missing and the report does not say so: "
            + "; ".join(s.detail for s in missing)
        )
        decision.to_add += [s.detail for s in missing]
    instructions = [s for s in verdict.signals if s.name == INSTRUCTIONS_SIGNAL]
    if instructions and not INSTRUCTION_WORDS.search(text):
        decision.problems.append(
            "the release data contains text addressed to the assessor, and the report does "
            "not mention it: " + "; ".join(s.detail for s in instructions)
        )
        decision.to_add += [s.detail for s in instructions]

    if decision.problems and not refused_before:
        decision.refused = True
        return decision
    decision.review_reasons += decision.problems
    if sorted_findings.dropped:
        decision.review_reasons.append(
            "the findings with no content of their own are left out of the stored report"
        )
    for signal in instructions:
        reason = f"release data tries to instruct the assessor: {signal.detail}"
        if reason not in decision.review_reasons:
            decision.review_reasons.append(reason)
    # Too little metric data is never a pass: whatever the model filed, a person looks.
    for signal in verdict.signals:
        if signal.needs_review and signal.name != INSTRUCTIONS_SIGNAL:
            decision.review_reasons.append(f"the policy asks for a person: {signal.detail}")
    return decision
