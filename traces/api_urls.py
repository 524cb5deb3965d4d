from __future__ import annotations

from django.urls import path

from traces import api

app_name = "traces_api"

urlpatterns = [
    path("releases/<str:version>/traces", api.traces, name="release_traces"),
]
