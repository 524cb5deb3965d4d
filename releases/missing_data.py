"""Whether a verdict's severity rests on missing data alone (issue 37, item 8).

`--fail-on medium` fails every release whose data has a gap (no metrics sent, no test results),
since the policy counts each missing field as medium: a team that sends no metrics file fails
every release. `--fail-on medium-known` is the setting between: it fails on a medium the
release's own data shows (a new failing test, an error rate up against its baseline, a risky
change) and lets a medium pass whose every policy signal at medium or above is a missing
field. A person's decision is never "missing data": it counts as decided.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MISSING_PREFIX = "missing_"


def _counts_as(signal: Mapping[str, Any]) -> str:
    """The level a stored signal adds to the policy's severity (`risk.signal.Signal.counts_as`:
    a high that is not critical counts as medium)."""
    level = str(signal.get("level") or "low")
    return "medium" if level == "high" and not signal.get("critical") else level


def rests_on_missing_data(severity: str | None, signals: Iterable[Mapping[str, Any]]) -> bool:
    """A medium whose policy signals at medium or above (at least one) are all missing fields."""
    if severity != "medium":
        return False
    counting = [
        signal
        for signal in signals
        if isinstance(signal, Mapping) and _counts_as(signal) in ("medium", "high")
    ]
    return bool(counting) and all(
        str(signal.get("name") or "").startswith(MISSING_PREFIX) for signal in counting
    )
