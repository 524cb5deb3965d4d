"""Evaluation runs of the agent against the scenario suite, and their per-trial results."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q
from django.utils import timezone

from evals.evaluators.trial import TrialResult
from evals.stats import RunSummary
from releases.models import Conversation, RunStatus


class EvalRun(models.Model):
    suite_version = models.CharField(max_length=32)
    provider = models.CharField(max_length=32, blank=True)
    model = models.CharField(max_length=128, blank=True)
    code_revision = models.CharField(
        max_length=64, blank=True, help_text="The git commit the agent ran from."
    )
    status = models.CharField(
        max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True
    )
    summary = models.JSONField(
        null=True,
        blank=True,
        help_text="Summary metrics (pass rate, mean scores per dimension, tokens, cost, "
        "latency); empty until the run has finished.",
    )
    is_baseline = models.BooleanField(
        default=False, help_text="Later runs are compared with this one."
    )
    notes = models.TextField(blank=True)
    planned_trials = models.PositiveIntegerField(
        default=0, help_text="Scenarios x trials: what a finished run will have recorded."
    )
    config = models.JSONField(
        default=dict,
        blank=True,
        help_text="How the run was started: trials per scenario, scenario pattern, reasoning "
        "strategy, concurrency, judge (never a key).",
    )
    error = models.TextField(blank=True, help_text="Why the run failed, when it did.")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life from the process running it."
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "eval run"
        permissions = [("mark_baseline", "Can mark an eval run as the baseline")]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=RunStatus.values), name="evalrun_status_valid"
            ),
            # Comparisons default to "the" baseline: there is never more than one.
            models.UniqueConstraint(
                fields=["is_baseline"],
                condition=Q(is_baseline=True),
                name="evalrun_one_baseline",
                violation_error_message="Another run is already the baseline.",
            ),
        ]
        indexes = [
            models.Index(fields=["is_baseline", "-created_at"], name="evalrun_baseline_recent"),
        ]

    def __str__(self) -> str:
        label = f"Eval run {self.pk} · suite {self.suite_version}"
        if self.model:
            label += f" · {self.model}"
        return label + (" · baseline" if self.is_baseline else "")

    @property
    def is_active(self) -> bool:
        return self.status in RunStatus.active()

    @property
    def headline(self) -> dict[str, Any]:
        """The run's summary figures (pass rate, mean scores, CIs...), empty until it ends."""
        return self.summary or {}

    @property
    def pass_rate(self) -> float | None:
        rate = self.headline.get("pass_rate")
        return rate if isinstance(rate, int | float) else None

    def run_summary(self) -> RunSummary | None:
        """The stored summary as the comparison code takes it (None until the run ends)."""
        data = self.headline.get("run_summary")
        return RunSummary.model_validate(data) if data else None

    @property
    def duration(self) -> float | None:
        """Seconds from start to finish, None while not both known."""
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    @property
    def short_revision(self) -> str:
        return self.code_revision[:10]

    @property
    def label(self) -> str:
        return f"#{self.pk} · {self.model or self.provider or 'unknown model'}"


class EvalResult(models.Model):
    """The outcome of one trial of one scenario in a run."""

    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    scenario_id = models.CharField(max_length=100)
    trial = models.PositiveIntegerField(help_text="Trial number within the run, from 1.")
    scores = models.JSONField(
        default=dict,
        blank=True,
        help_text="The evaluated trial (evals.evaluators.trial.TrialResult): a score per dimension "
        "between 0 and 1 with its checks, the severity filed, failure reasons, metrics.",
    )
    passed = models.BooleanField(
        null=True, blank=True, help_text="Empty when the trial errored and was not scored."
    )
    error = models.TextField(blank=True)
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="eval_results",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "scenario_id", "trial"]
        verbose_name = "eval result"
        constraints = [
            models.UniqueConstraint(
                fields=["run", "scenario_id", "trial"], name="evalresult_unique_trial"
            ),
            models.CheckConstraint(condition=Q(trial__gte=1), name="evalresult_trial_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.scenario_id} #{self.trial}"

    @property
    def status(self) -> str:
        """passed, failed, or errored (not scored: the provider or the harness failed)."""
        if self.passed is None:
            return "errored"
        return "passed" if self.passed else "failed"

    def trial_result(self) -> TrialResult | None:
        return TrialResult.model_validate(self.scores) if self.scores.get("status") else None
