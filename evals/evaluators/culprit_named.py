"""Does the filed report name the commit that broke the release? A check of
**decision_quality**, for scenarios that declare their culprit (`expect.culprit`).

A scenario made of a git history knows which commit broke it; its ingestion finds that commit
in the release under test (`Scenario.culprit_commit`). The report a person reads, the stored
report with what the policy carried into it (`policy_findings`: the API ends a report with
the policy's evidence the model left out), must name it: by a short sha (7 hex digits or
more, a prefix of its sha) or by its subject. This measures the whole way from the files to
the report (suspects ranked at ingestion, the policy's sentence, the model's filing); what the
model itself dropped is `evidence_kept.py`'s to say.
"""

from __future__ import annotations

import re

from evals.evaluators.score import Check
from evals.runner.transcript import Transcript
from evals.scenario import Culprit, Scenario

NAME = "names the culprit"
SHORT_SHA = 7
_HEX = re.compile(rf"(?<![0-9a-z])[0-9a-f]{{{SHORT_SHA},40}}(?![0-9a-z])", re.IGNORECASE)
# Quotes around a subject, straight or typographic, are not part of it.
_QUOTES = str.maketrans(dict.fromkeys("'\"`\u2018\u2019\u201c\u201d", " "))


def _plain(text: str) -> str:
    return " ".join(text.translate(_QUOTES).split()).casefold()


def names_commit(text: str, culprit: Culprit) -> str | None:
    """How `text` names the commit (the short sha or the subject it gives), or None."""
    sha = culprit.sha.lower()
    for token in _HEX.findall(text):
        if sha.startswith(token.lower()):
            return token
    subject = _plain(culprit.subject)
    if subject and subject in _plain(text):
        return repr(culprit.subject)
    return None


def culprit_check(scenario: Scenario, transcript: Transcript) -> Check | None:
    """None when the scenario declares no culprit or no report was filed (the dimension says
    that already)."""
    if scenario.expect.culprit is None:
        return None
    report = transcript.filed_report()
    if report is None:
        return None
    culprit = scenario.culprit_commit
    if culprit is None:
        return Check(
            name=NAME,
            passed=False,
            detail=f"the culprit {scenario.expect.culprit!r} was not found: the scenario's "
            "files were not ingested",
        )
    text = "\n".join([*report.findings, *report.policy_findings, report.summary])
    named = names_commit(text, culprit)
    short = culprit.sha[:SHORT_SHA]
    if named is not None:
        return Check(name=NAME, passed=True, detail=f"{short} named as {named}")
    return Check(
        name=NAME,
        passed=False,
        detail=f"the report names neither {short} nor {culprit.subject!r}",
    )
