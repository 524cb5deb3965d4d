from __future__ import annotations

from django.apps import AppConfig


class AssessmentsConfig(AppConfig):
    """A run of the agent on a release: its task, the seam into agent/ (runner/), the live
    stream of its events, its page and trace. The tables stay with releases (see
    docs/decisions/2026-11-27-house-by-context.md)."""

    name = "assessments"
    verbose_name = "Assessments"
    default_auto_field = "django.db.models.BigAutoField"
