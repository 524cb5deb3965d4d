from __future__ import annotations

from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"
    verbose_name = "Releases and assessments"
    default_auto_field = "django.db.models.BigAutoField"
