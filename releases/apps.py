from __future__ import annotations

from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"
    verbose_name = "Releases and assessments"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Here, before any URLconf loads: the release pages (releases/urls.py) and the run
        # and review pages (assessments/urls.py, review/urls.py) all read `<version:...>`.
        from django.urls import register_converter

        from releases.converters import VersionConverter

        register_converter(VersionConverter, "version")

        from releases import stored_verdict_hooks

        stored_verdict_hooks.connect(self)
