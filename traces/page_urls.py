from __future__ import annotations

from django.urls import path

from traces import page

app_name = "traces"

urlpatterns = [
    path("releases/<int:pk>/", page.release_panel, name="release_panel"),
]
