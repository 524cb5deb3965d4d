"""The policy's signal from suspect commits (issue 30, item 5): each new failure's first
suspect, said as evidence, and a raise only where that suspect's changed path is in a critical
area.

Kept apart from `history_signals.py`: it reads only `TestHistory.suspects`, which the sources
store where a checkout let them be computed; a release without them gets no signal here.
"""

from __future__ import annotations

from collections.abc import Sequence

from risk.history import TestHistory
from risk.settings import PolicySettings
from risk.signal import Signal, areas_in
from risk.suspects import ON_PATH, Suspect

# Failures named in the signal's detail; the rest are counted.
NAMED = 5


def _short(test: TestHistory) -> str:
    return test.label.rsplit("::", 1)[-1]


def suspect_sentence(test: TestHistory, top: Suspect) -> str:
    """'test_max_age fails in timed.py line 141, a line changed by 3f2c1e9 'subject' (author)',
    or, for a suspect that no frame names, the ranking's own reason."""
    return _sentence(_short(test), top, many=False)


def _sentence(who: str, top: Suspect, *, many: bool) -> str:
    fails = "fail" if many else "fails"
    if top.tier == ON_PATH and top.line is not None:
        where = (
            "a line changed by" if top.distance == 0 else f"{top.distance} lines from a change by"
        )
        return (
            f"{who} {fails} in {top.path} line {top.line}, {where} {top.sha[:7]} "
            f"'{top.subject}' ({top.author})"
        )
    return f"{who} {fails}; first suspect: {top.reason} ({top.author})"


def grouped_sentences(with_suspects: Sequence[tuple[TestHistory, Suspect]]) -> list[str]:
    """One sentence per first suspect: five same-named parametrized or inherited tests that
    share their suspect (itsdangerous' `test_max_age`, measured) are one clause, not five."""
    groups: dict[tuple[str, str, int | None], list[TestHistory]] = {}
    tops: dict[tuple[str, str, int | None], Suspect] = {}
    for test, top in with_suspects:
        key = (top.sha, top.path, top.line)
        groups.setdefault(key, []).append(test)
        tops.setdefault(key, top)
    sentences = []
    for key, tests in groups.items():
        names = list(dict.fromkeys(_short(t) for t in tests))
        who = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        if len(tests) > 1:
            who += f" ({len(tests)} failing tests)"
        sentences.append(_sentence(who, tops[key], many=len(tests) > 1))
    return sentences


def suspect_signals(new_failures: Sequence[TestHistory], cfg: PolicySettings) -> list[Signal]:
    """`new_failures`: the release's failures that are not known flaky."""
    with_suspects = [(t, t.suspects[0]) for t in new_failures if t.suspects]
    if not with_suspects:
        return []
    sentences = grouped_sentences(with_suspects)
    more = len(sentences) - NAMED
    detail = "; ".join(sentences[:NAMED]) + (
        f"; and {more} more suspects of other failures" if more > 0 else ""
    )
    signals = [
        Signal(
            name="failure_suspects",
            label="Suspect commits of new failures",
            level="none",
            critical=False,
            figure=len(with_suspects),
            threshold="evidence only; the level comes from the failures' own signals",
            detail=detail,
        )
    ]
    # Only a suspect whose changed lines the failure runs through, or whose path is what the
    # test exercises, puts a failure in a critical area: not a word in the test's name.
    critical = [
        (t, top, areas)
        for t, top in with_suspects
        if (areas := areas_in(top.path, cfg.critical_areas))
    ]
    if critical:
        found = sorted({a for _, _, areas in critical for a in areas})
        signals.append(
            Signal(
                name="suspect_in_critical_area",
                label="A new failure's first suspect changed a critical area",
                level=cfg.critical_area_failure_level,
                critical=True,
                figure=len(critical),
                threshold=f"{cfg.critical_area_failure_level} from 1 new failure whose first "
                "suspect changed a path in " + ", ".join(cfg.critical_areas),
                detail="; ".join(
                    f"{suspect_sentence(t, top)}: {top.path} is in {', '.join(areas)}"
                    for t, top, areas in critical[:NAMED]
                ),
                areas=tuple(found),
            )
        )
    return signals


def top_suspects(new_failures: Sequence[TestHistory], limit: int) -> list[str]:
    """Each new failure's first suspect, a sentence per suspect (failures sharing one are one
    clause), at most `limit` and a count of the rest: what the small profile, which has no
    drill-down, reads of the ranking (risk/digest.py)."""
    sentences = grouped_sentences([(t, t.suspects[0]) for t in new_failures if t.suspects])
    more = len(sentences) - limit
    return sentences[:limit] + (
        [f"and {more} more failures with other first suspects"] if more > 0 else []
    )


__all__ = ["grouped_sentences", "suspect_sentence", "suspect_signals", "top_suspects"]
