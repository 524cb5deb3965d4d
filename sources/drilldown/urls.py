"""The drill-downs' routes (under /api/, beside the release summary): see api.py here."""

from __future__ import annotations

from django.urls import path

from sources.drilldown import api

app_name = "drilldown"

urlpatterns = [
    path("releases/<str:version>/tests", api.release_tests, name="tests"),
    path("releases/<str:version>/changes", api.release_changes, name="changes"),
    path("releases/<str:version>/suspects", api.failure_suspects, name="suspects"),
    path(
        "releases/<str:version>/metrics/<str:metric>/history",
        api.metric_history,
        name="metric_history",
    ),
]
