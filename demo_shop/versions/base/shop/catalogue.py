"""The shop's products and carts, made up from their ids (the demo keeps no database)."""

from __future__ import annotations

from dataclasses import dataclass

PRODUCTS = {
    1: ("Espresso beans, 1 kg", 2490),
    2: ("Milk jug", 1250),
    3: ("Paper filters, 3 packs", 1197),
    4: ("Grinder brush", 590),
}


@dataclass(frozen=True)
class Line:
    product: int
    quantity: int
    # The line's price in cents: the unit price times the quantity, less a bundle discount.
    price_cents: int


def cart(cart_id: int) -> list[Line]:
    """A cart's lines. One cart in six keeps a line emptied to 0 items (the cart page lets
    the quantity go to 0 before the line is removed)."""
    lines = []
    for number, (product, (_, unit)) in enumerate(PRODUCTS.items()):
        quantity = (cart_id + number) % 4 + 1
        if number == 0 and cart_id % 6 == 0:
            quantity = 0
        discount = 100 * (quantity // 3)
        lines.append(Line(product, quantity, max(unit * quantity - discount, 0)))
    return lines
