"""The closed vocabularies of releases' tables: severities, run states, how a run ended and
where a report's verdict comes from. Apart from `models.py` so that the schema module stays
one schema."""

from __future__ import annotations

from django.db import models


class Severity(models.TextChoices):
    HIGH = "high", "High"
    MEDIUM = "medium", "Medium"
    LOW = "low", "Low"


class RunStatus(models.TextChoices):
    """The life cycle of a background run (an assessment, an evaluation)."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"

    @classmethod
    def active(cls) -> list[str]:
        return [cls.QUEUED, cls.RUNNING]

    @classmethod
    def finished(cls) -> list[str]:
        return [cls.SUCCEEDED, cls.FAILED, cls.CANCELLED]


class AssessmentOutcome(models.TextChoices):
    """What an assessment ended with, beside its status: which verdict it stored, if any."""

    FILED = "filed", "Filed"
    KEPT_REFUSED = "kept_refused", "Stored for review: the model did not correct its filing"
    POLICY_VERDICT = "policy_verdict", "Stored for review: the model filed nothing"
    NO_REPORT = "no_report", "No report"


class ReportOrigin(models.TextChoices):
    """Where a report's severity and findings come from."""

    MODEL = "model", "Filed by the model"
    REFUSED_FILING = "refused_filing", "The model's refused filing, kept for review"
    POLICY = "policy", "The policy's verdict: the model filed nothing"
