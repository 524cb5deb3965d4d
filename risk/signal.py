"""A signal of the risk policy, the verdict they add up to, and what the signals share: the
critical areas a text or a path touches, and how figures are written in their sentences."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from risk.changes import (
    CODE_KINDS,
    file_kind,
    is_dependency_subject,
    path_area_matches,
    subject_areas,
)
from risk.instructions import reads_like_instruction
from risk.settings import LEVEL_RANK, SCHEMA_AREA, Level, PolicySettings, Severity

# The signal of text in the release data addressed to the assessor; other signals that need a
# person (too little metric data) send the report to review without asking the report to
# speak of orders.
INSTRUCTIONS_SIGNAL = "instructions_in_data"
# History signals whose sentence the evidence carries at any level (PolicyVerdict.evidence).
# failure_suspects: which change each new failure runs through (issue 30), whatever the level.
ALWAYS_CITED = frozenset(
    {"known_flaky_failures", "metric_judge", "newly_skipped", "newly_flaky", "failure_suspects"}
)
# A range with no commit: its sentence is cited in every view, the brief one too, since it says
# what every other sentence means (a failure with no change behind it). Level none: a rebuild
# raises nothing by itself.
NO_CHANGES_SIGNAL = "no_changes"
# A signal whose sentence the evidence leaves out when the other one's is there, since that one
# says it again with more: "3 changes in payments and 8 failed tests" says what "3 changes in
# payments" does. Measured on Qwen2.5-Coder-1.5B (high_payment_failures, 3 of 3 trials): given
# both pairs, it merged the near-twins into one finding and dropped the error rate after them.
SAID_BY = {
    "failed_tests": "critical_area_failures",
    "risky_changes": "risky_changes_with_failures",
}


@dataclass(frozen=True, slots=True)
class Signal:
    """One thing the policy read in the release, and the level it gives it."""

    name: str
    label: str
    level: Level
    critical: bool
    figure: float | str | None = None
    threshold: str = ""
    detail: str = ""
    # Signals that always need a person, whatever the model files.
    needs_review: bool = False
    areas: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["areas"] = list(self.areas)
        return data

    @property
    def counts_as(self) -> Level:
        """The level this signal contributes to the policy's severity."""
        if self.level == "high" and not self.critical:
            return "medium"
        return self.level


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    severity: Severity
    signals: tuple[Signal, ...]

    def raised(self) -> list[Signal]:
        """The signals that raise the severity above low, highest first."""
        found = [s for s in self.signals if LEVEL_RANK[s.counts_as] >= LEVEL_RANK["medium"]]
        return sorted(found, key=lambda s: -LEVEL_RANK[s.counts_as])

    def missing(self) -> list[Signal]:
        return [s for s in self.signals if s.name.startswith("missing_")]

    def evidence(self, *, always_cited: bool = True) -> list[str]:
        """The policy's findings as sentences that carry their figures: text addressed to the
        assessor first (a report must say so), then the signals that raise the severity,
        highest first; for a release nothing raises, what each signal read.

        Measured on Qwen2.5-Coder-1.5B: told to copy each raised signal's detail, it copied
        the labels ("Error rate") and wrote its own comparisons, often the wrong way round; a
        list of finished sentences it copies as they are.

        Two sentences of the release's history come whatever their level, since they say
        why other figures count less than they seem to: which failures are known flaky, and
        how the metrics compare with their baseline; `always_cited=False` leaves them to a
        release nothing raises. A sentence another one already says with more is left out
        (SAID_BY); the report's signals keep it."""
        flagged = [s for s in self.signals if s.needs_review]
        shown = flagged + [s for s in self.raised() if s not in flagged]
        if not shown:
            return [s.detail for s in self.signals if s.detail]
        # Second, after orders in the data: the brief view keeps the first few sentences.
        context = [s for s in self.signals if s.name == NO_CHANGES_SIGNAL]
        shown = shown[: len(flagged)] + context + shown[len(flagged) :]
        if always_cited:
            shown += [s for s in self.signals if s.name in ALWAYS_CITED and s not in shown]
        names = {s.name for s in shown}
        return [s.detail for s in shown if s.detail and SAID_BY.get(s.name) not in names]

    def as_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "signals": [s.as_dict() for s in self.signals]}


def severity_of(signals: Iterable[Signal]) -> Severity:
    rank = max((LEVEL_RANK[s.counts_as] for s in signals), default=0)
    return "high" if rank >= 3 else "medium" if rank == 2 else "low"


def _word_pattern(word: str) -> str:
    # "auth" finds "authentication", "payment" finds "payments"; short words must be exact,
    # or "pay" would find "payload".
    tail = r"\w*" if len(word) >= 4 else ""
    return rf"\b{re.escape(word)}{tail}\b"


@functools.lru_cache(maxsize=32)
def _area_patterns(
    areas: tuple[tuple[str, tuple[str, ...]], ...],
) -> list[tuple[str, re.Pattern[str]]]:
    compiled = []
    for area, phrases in areas:
        alternatives = [
            "[^a-z0-9]+".join(_word_pattern(w) for w in phrase.lower().split())
            for phrase in phrases
            if phrase.strip()
        ]
        if alternatives:
            compiled.append((area, re.compile("|".join(alternatives))))
    return compiled


def areas_in(text: str, areas: Mapping[str, Sequence[str]]) -> list[str]:
    """The critical areas whose words appear in `text` (test names' underscores are spaces)."""
    return list(_areas_in(text, tuple((area, tuple(words)) for area, words in areas.items())))


# The policy, the digest and the grounding each ask about the same changes and test names.
@functools.lru_cache(maxsize=4096)
def _areas_in(text: str, areas: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[str, ...]:
    normalised = text.lower().replace("_", " ")
    return tuple(area for area, pattern in _area_patterns(areas) if pattern.search(normalised))


# Sentences name at most this many tests, files or authors ("and 3 more").
NAMED = 3


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def listed(items: Sequence[str]) -> str:
    """ "a, b and c"; past NAMED, "a, b, c and 2 more"."""
    shown_items = [shown(item) for item in items[:NAMED]]
    more = len(items) - NAMED
    if more > 0:
        return ", ".join(shown_items) + f" and {more} more"
    if len(shown_items) < 2:
        return "".join(shown_items)
    return ", ".join(shown_items[:-1]) + " and " + shown_items[-1]


def shown(text: str) -> str:
    # Signals reach the model: a test name that gives orders is named by what it is.
    return "[a test name that reads like instructions]" if reads_like_instruction(text) else text


def number(value: Any) -> float | None:
    """A finite number, or None (missing): a value the policy cannot read counts as missing."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def pct(value: float) -> str:
    """A fraction as a percentage a person reads: 0.071 -> "7.1 %"."""
    return f"{value * 100:.4g} %"


def ms(value: float) -> str:
    """Milliseconds with a thousands separator: 1350 -> "1,350 ms"."""
    return f"{value:,.10g} ms"


def level_by(
    value: float, *, medium_at_or_above: float | None = None, high_above: float | None = None
) -> Level:
    if high_above is not None and value > high_above:
        return "high"
    if medium_at_or_above is not None and value >= medium_at_or_above:
        return "medium"
    return "none"


@functools.lru_cache(maxsize=8)
def _schema_patterns(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE) if patterns else None


def schema_change_in(subject: str, cfg: PolicySettings) -> bool:
    """A subject that describes a database upgrade or schema change (`schema_change_patterns`)."""
    pattern = _schema_patterns(tuple(cfg.schema_change_patterns))
    return pattern is not None and bool(pattern.search(subject))


def change_areas(text: str, cfg: PolicySettings) -> list[str]:
    """The critical areas a change's subject names: its first line only (a body's prose and
    trailers such as `Co-authored-by:` are never content), by the areas' words standing whole
    ("login", not "authored"; "checkout", not "CaptureMode"), and a database upgrade or schema
    change (`schema_change_patterns`) as the schema's area. A dependency bump's subject
    ("Bump actions/checkout from 4 to 5") names no area."""
    subject = text.strip().split("\n", 1)[0]
    if is_dependency_subject(subject):
        return []
    found = subject_areas(subject, cfg.critical_areas)
    if SCHEMA_AREA not in found and schema_change_in(subject, cfg):
        found.append(SCHEMA_AREA)
    return sorted(found)


def path_areas(path: str, cfg: PolicySettings) -> list[str]:
    """The critical areas a changed file lies in, by the globs of `change_area_paths` and the
    service's own `critical_paths`: only for code and schema files (a test, doc, CI, lock,
    vendored or generated file is in no area; a file the reader flagged generated is left out
    before, with `ChangeFacts.code_files` and `CommitFacts.code_files`)."""
    if file_kind(path) not in CODE_KINDS:
        return []
    found = set(path_area_matches(path, cfg.change_area_paths))
    found.update(path_area_matches(path, cfg.critical_paths))
    return sorted(found)
