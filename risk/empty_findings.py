"""Findings with no content of their own: an evidence key alone, an empty item, a repeat.

Measured on the local model (issue 40): the small profile cited `E1` … `E18` where the
summary showed `E1` only, and the report tool filed what was not a key as it was, so 17
findings reading "E2" … "E18" were stored and shown. A finding must say something: a key
stands for the policy's sentence it names (the brief report tool files the sentence), and a
key alone, known or not, carries nothing a person can read.

`sort_findings` splits a filing's findings into those kept and the problems of the others,
one problem per kind (never one per key: eighteen keys are one mistake), in words that say
which keys the summary did show.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# "E17", "[E3]", "e2.", "E1, E2 and E4": keys and nothing else.
_KEY = r"[\[(\"'`]*\s*E\d{1,4}\s*[\])\"'`]*"
KEY_ONLY_RE = re.compile(rf"^\s*{_KEY}(\s*(,|;|/|&|\band\b)?\s*{_KEY})*\s*[.,;:]?\s*$", re.I)
_KEY_RE = re.compile(r"E\d{1,4}", re.I)


@dataclass(slots=True)
class SortedFindings:
    """The findings a report may store, and why the others may not be stored."""

    kept: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # The keys cited that the summary never showed, each once, in the order cited.
    unknown_keys: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> bool:
        return bool(self.problems)


def _norm(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(" .;,")


def _numbers(indexes: Sequence[int], verb: tuple[str, str]) -> str:
    """ "finding 3 is" or "findings 2, 3 are": `verb` is (singular, plural)."""
    one = len(indexes) == 1
    listed = ", ".join(str(i) for i in indexes)
    return f"{'finding' if one else 'findings'} {listed} {verb[0] if one else verb[1]}"


def showed(keys: Mapping[str, str]) -> str:
    """The keys the summary showed, as a refusal says them."""
    return ", ".join(keys) if keys else "none"


def sort_findings(findings: Sequence[str], keys: Mapping[str, str]) -> SortedFindings:
    """Split `findings` into those with content of their own and the problems of the rest.
    `keys`: the evidence keys the release's summary showed (its brief view), by key."""
    result = SortedFindings()
    empty: list[int] = []
    key_only: list[int] = []
    unknown: list[int] = []
    repeats: list[str] = []
    seen: dict[str, int] = {}
    known = {k.upper() for k in keys}
    for number, text in enumerate(findings, start=1):
        if not text.strip():
            empty.append(number)
            continue
        if KEY_ONLY_RE.match(text):
            cited = [k.upper() for k in _KEY_RE.findall(text)]
            strangers = [k for k in cited if k not in known]
            if strangers:
                unknown.append(number)
                result.unknown_keys += [k for k in strangers if k not in result.unknown_keys]
            else:
                key_only.append(number)
            continue
        first = seen.setdefault(_norm(text), number)
        if first != number:
            repeats.append(f"finding {number} repeats finding {first}")
            continue
        result.kept.append(text)
    if unknown:
        result.problems.append(
            f"{_numbers(unknown, ('cites', 'cite'))} evidence keys the release's summary "
            f"never showed ({', '.join(result.unknown_keys)}); it showed {showed(keys)}"
        )
    if key_only:
        result.problems.append(
            f"{_numbers(key_only, ('is', 'are'))} only an evidence key, with no words of their own"
        )
    if empty:
        result.problems.append(f"{_numbers(empty, ('is', 'are'))} empty")
    if repeats:
        result.problems.append("; ".join(repeats) + " (a finding says a thing once)")
    return result
