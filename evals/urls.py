from __future__ import annotations

from django.urls import path

from evals import views

app_name = "evals"

urlpatterns = [
    path("", views.eval_run_list, name="list"),
    path("runs/<int:pk>/", views.eval_run_detail, name="run"),
    path("runs/<int:pk>/baseline", views.mark_baseline, name="mark_baseline"),
    path("compare/<int:pk>/", views.compare, name="compare"),
]
