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
