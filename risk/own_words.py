"""What of a report is the model's own: the findings that are not the policy's sentences.

Measured on the local model (issue 40): the small profile filed exactly the policy's severity
and its evidence, 20 of 20; no stored report held a word the model chose, and the page showed
the same sentences twice (the findings, then the policy's signals). A finding is the policy's
when it is one of the policy's sentences (a signal's reading, or the evidence it added) or
made of their clauses only, whatever the spacing, case or closing stop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from risk.grounding import FOUND, UNCHECKED

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


@dataclass(frozen=True, slots=True)
class OwnWords:
    """How much of a filed report is the model's own, and how much of that holds.

    `share`: of the report's text (its findings and its summary), the share that is not the
    policy's sentences. `held`: of that own text, the share whose figures and claims the
    grounding found in the data; `unchecked`: the share with nothing the grounding could check
    (no figure, no claim it knows). The rest contradicts the data or is not in it. Both None
    when the model wrote nothing of its own."""

    share: float | None
    held: float | None
    unchecked: float | None
    own: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"share": self.share, "held": self.held, "unchecked": self.unchecked}


def own_words(
    findings: Sequence[str],
    summary: str,
    policy_sentences: Iterable[str],
    grounding: Iterable[Mapping[str, Any]] = (),
) -> OwnWords:
    """The model's own part of a report (`grounding`: `ReportGrounding.as_list()`, each part's
    `text` and `verdict`). The summary is the model's own unless it only repeats the policy."""
    sentences = list(policy_sentences)
    texts = [*findings, *([summary] if summary.strip() else [])]
    total = sum(len(t) for t in texts)
    if not total:
        return OwnWords(None, None, None)
    own = own_findings(texts, sentences)
    own_chars = sum(len(t) for t in own)
    if not own_chars:
        return OwnWords(0.0, None, None)
    verdicts = {str(part.get("text")): str(part.get("verdict")) for part in grounding}
    held = sum(len(t) for t in own if verdicts.get(t) == FOUND)
    unchecked = sum(len(t) for t in own if verdicts.get(t, UNCHECKED) == UNCHECKED)
    return OwnWords(own_chars / total, held / own_chars, unchecked / own_chars, tuple(own))
