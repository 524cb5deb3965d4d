"""The release API's routes (under /api/, in the `api:` namespace): see release_api.py and
pipeline_api.py here. Filing a report, `api:risk_reports`, is routed from
assessments/api_urls.py; the site joins the two (detective_site/urls.py)."""

from __future__ import annotations

from django.urls import path

from sources import pipeline_api, release_api

app_name = "api"

urlpatterns = [
    path("releases/<str:version>/summary", release_api.release_summary, name="release_summary"),
    path("releases/<str:version>/verdict", release_api.release_verdict, name="release_verdict"),
    path("releases/<str:version>/waiting", pipeline_api.pipeline_waiting, name="pipeline_waiting"),
]
