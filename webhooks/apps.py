from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "webhooks"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        # releases sends the signals and never imports this app (releases/signals.py).
        from releases import signals
        from webhooks import receivers

        signals.verdict_filed.connect(receivers.on_verdict_filed, dispatch_uid="webhooks.filed")
        signals.verdict_decided.connect(
            receivers.on_verdict_decided, dispatch_uid="webhooks.decided"
        )
