"""Filing a run's report, `POST /api/risk-reports`, in the release API's `api:` namespace
(sources/api_urls.py has the rest; detective_site/urls.py joins them)."""

from __future__ import annotations

from django.urls import path

from assessments import report_api

urlpatterns = [
    path("risk-reports", report_api.file_risk_report, name="risk_reports"),
]
