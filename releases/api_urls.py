"""The release API's routes (under /api/): see releases/api.py."""

from __future__ import annotations

from django.urls import path

from releases import api, pipeline_api

app_name = "api"

urlpatterns = [
    path("releases/<str:version>/summary", api.release_summary, name="release_summary"),
    path("releases/<str:version>/verdict", api.release_verdict, name="release_verdict"),
    path("releases/<str:version>/waiting", pipeline_api.pipeline_waiting, name="pipeline_waiting"),
    path("risk-reports", api.file_risk_report, name="risk_reports"),
]
