"""Why a severity, in one sentence a person reads in a CI summary's headline (issue 37, item
9): the labels of the policy's signals that set it, from their stored form (`Signal.as_dict`),
never their long sentences (the findings and the release page carry those)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# More than this many labels stops being a sentence a person reads at a glance.
MOST_LABELS = 3


def _counts_as(signal: Mapping[str, Any]) -> str:
    """`Signal.counts_as` on the stored form: a high outside a critical area is a medium."""
    level = str(signal.get("level") or "none")
    return "medium" if level == "high" and not signal.get("critical") else level


def _label(signal: Mapping[str, Any]) -> str:
    label = " ".join(str(signal.get("label") or signal.get("name") or "").split())
    label = label[:1].lower() + label[1:]
    figure = signal.get("figure")
    # A count says how much at a glance; a ratio or a latency needs its unit, which the
    # finding's own sentence gives.
    countable = isinstance(figure, int | float) and not isinstance(figure, bool)
    if countable and figure == int(figure) and figure > 1:
        return f"{label} ({int(figure)})"
    return label


def why(signals: Iterable[Mapping[str, Any]], severity: str | None) -> str:
    """ "Medium from failed tests (5), failures that are not known flaky (5) and 1 more." The
    empty string when there is no severity."""
    if severity not in ("low", "medium", "high"):
        return ""
    stored = [signal for signal in signals if isinstance(signal, Mapping)]
    setting = [_label(signal) for signal in stored if _counts_as(signal) == severity]
    if not setting:
        if severity == "low":
            return f"No signal of risk in the policy's {len(stored)} checks."
        return f"{severity.capitalize()}: no signal of the policy's sets it (see the findings)."
    shown = setting[:MOST_LABELS]
    rest = len(setting) - len(shown)
    if rest:
        listed = f"{', '.join(shown)} and {rest} more"
    elif len(shown) > 1:
        listed = f"{', '.join(shown[:-1])} and {shown[-1]}"
    else:
        listed = shown[0]
    return f"{severity.capitalize()} from {listed}."
