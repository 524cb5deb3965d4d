"""The review desk's pages, in the `releases:` namespace (see releases/urls.py)."""

from __future__ import annotations

from django.urls import path

from review import views

urlpatterns = [
    path("review/", views.review_queue, name="review"),
    path("review/reports/<int:pk>/decide", views.decide, name="review_decide"),
    path("review/decisions/<int:pk>/export", views.export, name="review_export"),
    path(
        "review/decisions/<int:pk>/scenario.toml",
        views.scenario_file,
        name="review_scenario",
    ),
]
