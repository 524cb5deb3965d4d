from __future__ import annotations

from django.urls import path

from sources import views

app_name = "sources"

urlpatterns = [
    path("releases/new", views.release_new, name="release_new"),
    path("releases/<int:pk>/edit", views.release_edit, name="release_edit"),
]
