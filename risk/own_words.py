"""What of a report is the model's own: the findings that are not the policy's sentences.

Measured on the local model (issue 40): the small profile filed exactly the policy's severity
and its evidence, 20 of 20; no stored report held a word the model chose, and the page showed
the same sentences twice (the findings, then the policy's signals). A finding is the policy's
when it is one of the policy's sentences (a signal's reading, or the evidence it added) or
made of their clauses only, whatever the spacing, case or closing stop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_JOINS = re.compile(r";\s+|\.\s+(?=[A-Z])")


def _norm(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(" .;,")


def _pieces(sentences: Iterable[str]) -> set[str]:
    known: set[str] = set()
    for sentence in sentences:
        known.add(_norm(sentence))
        known.update(_norm(p) for p in _JOINS.split(sentence) if p.strip())
    return known - {""}


def own_findings(findings: Sequence[str], policy_sentences: Iterable[str]) -> list[str]:
    """The findings that say something the policy's sentences do not."""
    known = _pieces(policy_sentences)
    own = []
    for finding in findings:
        parts = [_norm(p) for p in _JOINS.split(finding) if p.strip()]
        if _norm(finding) in known or (parts and all(p in known for p in parts)):
            continue
        own.append(finding)
    return own


def own_share(findings: Sequence[str], policy_sentences: Iterable[str]) -> float | None:
    """The share of the findings' characters that are the model's own (None: no findings)."""
    total = sum(len(f) for f in findings)
    if not total:
        return None
    return sum(len(f) for f in own_findings(findings, policy_sentences)) / total
