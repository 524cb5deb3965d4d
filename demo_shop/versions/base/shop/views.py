from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from shop import catalogue, pricing


def products(request: HttpRequest) -> JsonResponse:
    items = [
        {"id": id_, "name": name, "price_cents": cents}
        for id_, (name, cents) in catalogue.PRODUCTS.items()
    ]
    return JsonResponse({"products": items})


def cart_total(request: HttpRequest, cart_id: int) -> JsonResponse:
    lines = catalogue.cart(cart_id)
    return JsonResponse({"cart": cart_id, "total_cents": pricing.cart_total(lines)})


def health(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})
