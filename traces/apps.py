from __future__ import annotations

from django.apps import AppConfig


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Traces and errors"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The policy's verdict is sources' (sources/judging.py), below this app: it asks the
        # hook, which this app fills.
        from sources import judging_hooks, release_hooks
        from traces.history import trace_signals
        from traces.services import attribute_held

        judging_hooks.install(trace_signals)
        # Spans held for a version whose release had not been sent become the release's.
        release_hooks.install(attribute_held)
