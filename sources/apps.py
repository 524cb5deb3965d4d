from django.apps import AppConfig


class SourcesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sources"
    verbose_name = "Sources: ingested release detail"

    def ready(self) -> None:
        # The verdict falls back on the policy's judgement with the history kept here
        # (releases/policy_judge.py says why it is a hook).
        from releases import policy_judge
        from sources.judging import judge_release

        policy_judge.install(judge_release)

        # A new source changes the release's data fingerprint, so the stored verdict (the
        # policy's where its report is now stale): releases/stored_verdict_hooks.py.
        from django.db.models.signals import post_delete, post_save

        from releases import stored_verdict_hooks
        from sources.models import Ingestion

        uid = "stored_verdict.source"
        post_save.connect(
            stored_verdict_hooks.source_saved, sender=Ingestion, dispatch_uid=f"{uid}.saved"
        )
        post_delete.connect(
            stored_verdict_hooks.source_deleted, sender=Ingestion, dispatch_uid=f"{uid}.deleted"
        )
