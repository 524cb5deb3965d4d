"""Did the model's report keep the policy's evidence? A check of **decision_quality**, critical.

The release API keeps what the model leaves out of the policy's evidence in the stored report,
marked as the policy's (`risk/carried.py`): a stored report never says less than the policy.
So that this still measures the model, the check reads what the *model* filed, the arguments
of its last successful `file_risk_report` call (for the brief tool, the sentences its keys
stand for), never the stored report, and holds it against the policy's evidence as the model
was shown it: the `policy.evidence` of the last release summary it read (all of it in the full
view, the keyed first sentences in the brief one). A sentence the model never saw is not one
it left out. Whether a finding carries a sentence is the API's own rule (`risk/carried.py`):
the same sentence, or its figures, tests and commits in one finding.
"""

from __future__ import annotations

import json
from typing import Any

from evals.evaluators.score import Check
from evals.runner.transcript import FiledReport, Transcript, _report_from_arguments
from evals.scenario import REPORT_TOOL, SUMMARY_TOOL
from risk.carried import left_out

NAME = "keeps the policy's evidence"


def _summary_of(content: str, data: dict[str, Any] | None) -> Any:
    if data:
        return data
    try:
        return json.loads(content)
    except ValueError:
        return None


def evidence_shown(transcript: Transcript) -> list[str] | None:
    """The policy's evidence in the last release summary the model read; None when it read
    none, or the summary carried no evidence."""
    for inv in reversed(transcript.invocations()):
        if inv.name != SUMMARY_TOOL or not inv.succeeded or inv.result is None:
            continue
        summary = _summary_of(inv.result.content, inv.result.data)
        policy = summary.get("policy") if isinstance(summary, dict) else None
        evidence = policy.get("evidence") if isinstance(policy, dict) else None
        if isinstance(evidence, dict):
            evidence = list(evidence.values())
        if not isinstance(evidence, list):
            return None
        return [str(sentence) for sentence in evidence if str(sentence).strip()]
    return None


def model_filing(transcript: Transcript) -> FiledReport | None:
    """What the model filed: its last successful filing call, else the report as recorded
    (which holds the model's findings: the trial API keeps the policy's additions apart)."""
    filings = [i for i in transcript.invocations() if i.name == REPORT_TOOL and i.succeeded]
    if filings:
        return _report_from_arguments(filings[-1])
    return transcript.filed_report()


def evidence_check(transcript: Transcript) -> Check | None:
    """None when the model filed nothing or read no evidence of the policy."""
    filed = model_filing(transcript)
    evidence = evidence_shown(transcript)
    if filed is None or not evidence:
        return None
    lost = left_out(evidence, [*filed.findings, filed.summary])
    detail = f"{len(evidence) - len(lost)}/{len(evidence)} of the policy's sentences kept" + (
        f"; left out: {'; '.join(repr(s) for s in lost)}" if lost else ""
    )
    return Check(name=NAME, passed=not lost, detail=detail, critical=True)
