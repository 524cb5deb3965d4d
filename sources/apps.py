from django.apps import AppConfig


class SourcesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sources"
    verbose_name = "Sources: ingested release detail"

    def ready(self) -> None:
        # A CI job reads its release's verdict with the ingestion token it sent the release
        # with; releases' verdict API asks this checker (releases/token_hooks.py).
        from releases import history_hooks, token_hooks
        from sources.history import read_history
        from sources.selectors import token_scope

        token_hooks.register(token_scope)
        # The risk policy's history-aware signals read a release's past from the detail
        # tables (releases/history_hooks.py).
        history_hooks.install(read_history)
