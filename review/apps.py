from __future__ import annotations

from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """The review desk: reviewers' decisions on filed reports and their export as eval
    scenarios. The decisions' table stays with releases (the verdict reads it)."""

    name = "review"
    verbose_name = "Review"
    default_auto_field = "django.db.models.BigAutoField"
