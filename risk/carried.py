"""Does a report carry the policy's evidence? Which of the policy's sentences it leaves out.

A filed report never says less than the policy's evidence (`PolicyVerdict.evidence()`): what
the model leaves out is added to the stored report, marked as the policy's (the release API),
and an eval fails a model that left it out (`evals/evaluators/evidence_kept.py`).

A sentence of the policy is carried by one finding (or the summary) of the report when:

1. the finding holds the sentence as it is (case, spaces and the final stop aside), or
2. the sentence names things a reader acts on, its *anchors*, and the finding names every one:
   its figures (read with their units, `figures.py`: `2 %` is `0.02`, never `2 failed tests`;
   the policy's own limits, "the 5 % limit", aside), the tests it names (by name or most of
   their words, as `claims.py` finds a failing test in a sentence) and the commits it names
   (a short or long hash). "0 failed tests" is carried by "no failed tests";
3. the sentence is about text in the data addressed to the assessor, and the finding speaks
   of it (the words `filing.py` asks a report for);
4. the sentence names none of these (missing data: "missing from the release data: the test
   results"): the finding says at least two thirds of its words (stemmed, common ones aside),
   a word of missing data (`filing.py`'s) standing for another.

One finding must carry the whole sentence: a figure in one finding and a test name in another
carry nothing, since "8 failed tests" beside "payments changed" does not say that the payment
tests fail. The rules read figures and names, not wording, so that a model's own sentence with
the same figures carries the policy's, and a rewording of the policy's sentences keeps working.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from risk import claims
from risk.figures import Figure, extract_figures

_SPACES_RE = re.compile(r"\s+")
_WORD_RE = re.compile(r"[a-z0-9]+")
# A commit as a sentence names it: 7 to 40 hex digits with a digit and a letter in them.
_COMMIT_RE = re.compile(r"(?<![\w/])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/])")
_LIMIT_AFTER = ("limit", "threshold", "allowed", "max", "maximum")
_ZERO_WORDS = frozenset({"no", "none", "zero", "without"})
# Words of every sentence of the policy, which tell one sentence from another not at all.
_COMMON = frozenset(
    {"the", "a", "an", "of", "in", "on", "to", "and", "or", "is", "are", "was", "were", "from",
     "for", "by", "at", "its", "it", "this", "that", "with", "as", "be", "release", "data"}
)  # fmt: skip
_CARRIED_SHARE = 2 / 3
# Words that say data is missing, and words that say the data gives orders: what a report
# must say of them (`filing.py`), and what carries the policy's sentence of them here.
MISSING_WORDS = re.compile(
    r"\b(missing|absent|unavailable|not available|not provided|not reported|no data|"
    r"no (test|metric|change|deployment|data)\w*|not (given|present|supplied|known)|"
    r"not measured|unknown|lack|lacking|without (test|metric|change|data)|none reported|"
    r"not included|no changes? (list|listed))",
    re.IGNORECASE,
)
# Words that say the data gives orders. Not "addressed to the assessor": the local model wrote
# "the release data is addressed to the assessor", which tells a reader nothing.
INSTRUCTION_WORDS = re.compile(
    r"\b(instruction|injection|inject|manipulat|suspicious|orders?|tries to|attempt|prompt)",
    re.IGNORECASE,
)


def _normal(text: str) -> str:
    return _SPACES_RE.sub(" ", text).strip().rstrip(".").strip().lower()


def _is_limit(text: str, figure: Figure) -> bool:
    """The policy's limit ("above the 5 % limit", "from the 2 % limit for medium up to 5 %"),
    not a reading of the release."""
    after = _WORD_RE.findall(text[figure.start + len(figure.text) :].lower())[:2]
    before = text[: figure.start].lower().rstrip()
    return any(w.startswith(_LIMIT_AFTER) for w in after) or before.endswith("up to")


def _canonical(figure: Figure) -> float:
    if figure.unit == "%":
        return figure.value / 100
    if figure.unit == "s":
        return figure.value * 1000
    return figure.value


def _noun(text: str, figure: Figure) -> str | None:
    """What a bare count counts: the word after it, stemmed ("8 failed tests": fail), unless
    a common word ("4 of the last 10")."""
    after = _WORD_RE.findall(text[figure.start + len(figure.text) :].lower())[:1]
    return claims._stem(after[0]) if after and after[0] not in _COMMON else None


def _figure_said(figure: Figure, sentence: str, finding: str, said: Sequence[Figure]) -> bool:
    """Is this figure of the sentence in the finding? A bare count with what it counts near
    it: "1 change" is not said by "1 failing test"."""
    noun = None if figure.unit or figure.decimals else _noun(sentence, figure)
    if figure.value == 0 and not figure.unit:
        words = set(_WORD_RE.findall(finding.lower()))
        stems = {claims._stem(w) for w in words}
        if words & _ZERO_WORDS and (noun is None or noun in stems):
            return True
    for other in said:
        # A bare count is said by a bare count only: "2 %" is not "2 failed tests".
        if not figure.unit and other.unit:
            continue
        if not other.matches([_canonical(figure)]):
            continue
        near = _WORD_RE.findall(finding[other.start + len(other.text) :].lower())[:3]
        if noun is None or noun in {claims._stem(w) for w in near}:
            return True
    return False


def _tests_named(text: str) -> list[str]:
    return list(dict.fromkeys(m.group(0) for m in claims._TEST_NAME_RE.finditer(text)))


def _content_words(text: str) -> set[str]:
    return {
        claims._stem(w)
        for w in _WORD_RE.findall(text.lower().replace("_", " "))
        if w not in _COMMON and not w.isdigit()
    }


def _says_missing(text: str) -> bool:
    return MISSING_WORDS.search(text) is not None


def _speaks_of_orders(text: str) -> bool:
    return INSTRUCTION_WORDS.search(text) is not None


def carries(finding: str, sentence: str) -> bool:
    """Does this one finding carry this sentence of the policy's evidence?"""
    if _normal(sentence) and _normal(sentence) in _normal(finding):
        return True
    if _speaks_of_orders(sentence):
        return _speaks_of_orders(finding)
    figures = [f for f in extract_figures(sentence) if not _is_limit(sentence, f)]
    figures = figures or extract_figures(sentence)
    tests = _tests_named(sentence)
    commits = _COMMIT_RE.findall(sentence.lower())
    if figures or tests or commits:
        said = extract_figures(finding)
        lowered = finding.lower()
        return (
            all(_figure_said(f, sentence, finding, said) for f in figures)
            and len(claims._named_failing(finding, tests)) == len(tests)
            and all(c in lowered or c[:7] in lowered for c in commits)
        )
    wanted = _content_words(sentence)
    if not wanted:
        return False
    have = _content_words(finding)
    if _says_missing(sentence) and _says_missing(finding):
        have |= {w for w in wanted if _says_missing(w)}
    return len(wanted & have) >= _CARRIED_SHARE * len(wanted)


def left_out(evidence: Iterable[str], said: Sequence[str]) -> list[str]:
    """The sentences of `evidence` that no text of `said` (the findings, the summary)
    carries, in the policy's order, each once."""
    texts = [t for t in said if t.strip()]
    missing: list[str] = []
    for sentence in evidence:
        if not sentence.strip() or sentence in missing:
            continue
        if not any(carries(text, sentence) for text in texts):
            missing.append(sentence)
    return missing


FROM_POLICY = "from the policy"


def with_policy_parts(
    parts: Sequence[dict[str, Any]], added: Sequence[str]
) -> list[dict[str, Any]]:
    """A report's grounding (`ReportGrounding.as_list()`) with an entry for each finding the
    policy added, after the model's findings and before the summary: the policy's sentences,
    grounded by construction, flagged `from_policy`."""
    findings = [p for p in parts if p.get("where") != "summary"]
    summary = [p for p in parts if p.get("where") == "summary"]
    ours = [
        {
            "where": f"finding {len(findings) + n}",
            "text": text,
            "evidence": [],
            "problems": [],
            "signals": [],
            "grounded": True,
            "verdict": "policy",
            "label": FROM_POLICY,
            "from_policy": True,
        }
        for n, text in enumerate(added, start=1)
    ]
    return [*findings, *ours, *summary]
