from __future__ import annotations

from django.apps import AppConfig


class DetectiveSiteConfig(AppConfig):
    name = "detective_site"
    verbose_name = "Detective site"

    def ready(self) -> None:
        from detective_site import checks  # noqa: F401  (registers the system checks)
