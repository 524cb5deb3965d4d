"""What changed in the policy's reading of a release between two reports of it (issue 37,
item 10: a report asked again shows the earlier decision and what changed since), from the
signals' stored form (`Signal.as_dict`): one line a signal whose level or figure moved."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# A desk card says the few that matter; the report lists them all.
MOST_CHANGES = 5


def _figure(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "none" if value is None else str(value).lower()
    if isinstance(value, int | float):
        return f"{int(value):,}" if value == int(value) else f"{value:.4g}"
    return " ".join(str(value).split())[:40]


def _by_name(signals: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str(s.get("name")): s for s in signals if isinstance(s, Mapping) and s.get("name")}


def changes_between(
    earlier: Iterable[Mapping[str, Any]], now: Iterable[Mapping[str, Any]]
) -> tuple[list[str], int]:
    """The lines to show ("Failed tests: 0 → 5 (none → medium)"), at most MOST_CHANGES, and
    how many more moved. A signal only one report has is "new" or "gone"."""
    before, after = _by_name(earlier), _by_name(now)
    lines = []
    for name in [*after, *(n for n in before if n not in after)]:
        old, new = before.get(name), after.get(name)
        label = str((new or old or {}).get("label") or name)
        if old is None:
            lines.append(f"{label}: new ({new.get('level', 'none')})")  # type: ignore[union-attr]
            continue
        if new is None:
            lines.append(f"{label}: gone (was {old.get('level', 'none')})")
            continue
        moved_level = old.get("level") != new.get("level")
        moved_figure = _figure(old.get("figure")) != _figure(new.get("figure"))
        if not moved_level and not moved_figure:
            continue
        line = f"{label}: {_figure(old.get('figure'))} → {_figure(new.get('figure'))}"
        if moved_level:
            line += f" ({old.get('level', 'none')} → {new.get('level', 'none')})"
        lines.append(line)
    return lines[:MOST_CHANGES], max(0, len(lines) - MOST_CHANGES)
