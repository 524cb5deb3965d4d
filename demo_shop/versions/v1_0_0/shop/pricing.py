"""A cart's total in cents."""

from __future__ import annotations

from collections.abc import Iterable

from shop.catalogue import Line


def line_total(line: Line) -> int:
    return line.price_cents


def cart_total(lines: Iterable[Line]) -> int:
    return sum(line_total(line) for line in lines)
