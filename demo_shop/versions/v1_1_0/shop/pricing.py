"""A cart's total in cents."""

from __future__ import annotations

from collections.abc import Iterable

from shop.catalogue import Line


def line_total(line: Line) -> int:
    # Rounded per unit, so that a line's total is its units' prices added up.
    unit = line.price_cents / line.quantity
    return round(unit) * line.quantity


def cart_total(lines: Iterable[Line]) -> int:
    return sum(line_total(line) for line in lines)
