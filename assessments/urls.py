"""A run's pages, in the `releases:` namespace (see releases/urls.py)."""

from __future__ import annotations

from django.urls import path

from assessments import views

urlpatterns = [
    path("releases/<version:version>/reassess", views.reassess, name="reassess"),
    path(
        "services/<slug:service>/releases/<version:version>/reassess",
        views.reassess,
        name="service_reassess",
    ),
    path("runs/<uuid:pk>/", views.run_detail, name="run"),
    path("runs/<uuid:pk>/cancel", views.cancel, name="run_cancel"),
]
