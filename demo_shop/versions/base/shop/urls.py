from __future__ import annotations

from django.urls import path

from shop import views

urlpatterns = [
    path("products", views.products),
    path("cart/<int:cart_id>/total", views.cart_total),
    path("health", views.health),
]
