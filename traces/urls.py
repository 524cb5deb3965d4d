from __future__ import annotations

from django.urls import path

from traces import views

app_name = "otlp"

urlpatterns = [
    path("v1/traces", views.export_traces, name="traces"),
    path("v1/logs", views.export_logs, name="logs"),
]
