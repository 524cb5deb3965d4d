"""Websocket routes."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from assessments.consumers import RunConsumer
from evals.live import EvalRunConsumer

websocket_urlpatterns: list[URLPattern | URLResolver] = [
    path("ws/runs/<uuid:run_id>/", RunConsumer.as_asgi()),
    path("ws/evals/runs/<int:pk>/", EvalRunConsumer.as_asgi()),
]
