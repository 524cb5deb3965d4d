from django.apps import AppConfig


class SourcesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sources"
    verbose_name = "Sources: ingested release detail"

    def ready(self) -> None:
        # A CI job reads its release's verdict with the ingestion token it sent the release
        # with; releases' verdict API asks this checker (releases/token_hooks.py).
        from releases import token_hooks
        from sources.selectors import token_scope

        token_hooks.register(token_scope)
        # A release's summary says which drill-downs have something to show.
        from releases import drilldown_hooks
        from sources.drilldown.available import available

        drilldown_hooks.register(available)
