from __future__ import annotations

from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Evaluations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The release API and the run page may not import evals (evals builds on them): where a
        # run is an eval trial, they ask these (releases/eval_hooks.py).
        from evals import api_source, selectors
        from releases import eval_hooks

        eval_hooks.installed.trial_api = api_source
        eval_hooks.installed.trial_verdict = selectors.trial_verdict
        eval_hooks.installed.trial_release = api_source.trial_release
