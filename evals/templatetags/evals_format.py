"""Display helpers for eval figures: shares, scores, intervals, deltas (None shows as a dash)."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

EN_DASH = "\u2013"
MINUS = "\u2212"

DIMENSION_NAMES = {
    "tool_usage": "Tool usage",
    "decision_quality": "Decision quality",
    "error_handling": "Error handling",
    "judge": "LLM judge",
}


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@register.filter
def share(value: Any) -> str:
    """0.853 -> "85%"."""
    number = _number(value)
    return "—" if number is None else f"{number:.0%}"


@register.filter
def score(value: Any) -> str:
    """0.9234 -> "0.92"; a MeanStat shows its mean."""
    number = _number(getattr(value, "mean", value))
    return "—" if number is None else f"{number:.2f}"


@register.filter
def interval(value: Any, kind: str = "share") -> str:
    """An Interval (or [low, high]) as "78-90%" (kind "share") or "0.71-0.95" ("score")."""
    if value is None:
        return ""
    low, high = (value.low, value.high) if hasattr(value, "low") else value
    if kind == "score":
        return f"{low:.2f}{EN_DASH}{high:.2f}"
    return f"{low:.0%}{EN_DASH}{high:.0%}"


@register.filter
def delta_points(value: Any) -> str:
    """A change of a share in percentage points: -0.083 -> "-8 pts" (with a minus sign)."""
    number = _number(value)
    if number is None:
        return "—"
    points = round(number * 100)
    if points == 0:
        return "±0"
    return f"{'+' if points > 0 else MINUS}{abs(points)} pts"


@register.filter
def delta_score(value: Any) -> str:
    number = _number(value)
    if number is None:
        return "—"
    if abs(number) < 0.005:
        return "±0.00"
    return f"{'+' if number > 0 else MINUS}{abs(number):.2f}"


@register.filter
def trend(value: Any, threshold: float = 0.05) -> str:
    """A CSS modifier for a delta: "up", "down" (beyond the threshold), "flat"."""
    number = _number(value)
    if number is None or abs(number) <= threshold + 1e-9:
        return "flat"
    return "up" if number > 0 else "down"


SHORT_NAMES = {
    "tool_usage": "Tools",
    "decision_quality": "Decision",
    "error_handling": "Handling",  # a score of error handling, not a count of errors
    "judge": "Judge",
}


@register.filter
def dimension_short(value: str) -> str:
    """A column header's name for a dimension."""
    return SHORT_NAMES.get(value, dimension_name(value))


@register.filter
def dimension_name(value: str) -> str:
    return DIMENSION_NAMES.get(value, value.replace("_", " ").capitalize())


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """`mapping[key]`, or None."""
    try:
        return mapping[key]
    except (KeyError, IndexError, TypeError):
        return None
