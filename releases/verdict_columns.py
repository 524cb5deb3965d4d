"""The verdict the pages show, kept on the release (issue 39): the columns `Release` inherits.

Written only by `releases/stored_verdict.py` (`refresh_stored_verdict`), with what
`release_verdict` computes at each write that can change it; the lists filter, sort and count
by them (indexed) rather than recomputing every row's verdict in their query. A module of its
own so that `models.py` stays under its size limit.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class VerdictColumns(models.Model):
    # The severity that counts (releases/severity.py) and its rank (3 high ... 1 low); empty
    # (rank None): no report. An empty text column here means none.
    verdict_severity = models.CharField(max_length=8, blank=True, editable=False)
    verdict_rank = models.PositiveSmallIntegerField(null=True, blank=True, editable=False)
    verdict_state = models.CharField(max_length=16, default="not_assessed", editable=False)
    # The latest report's: the model's and the policy's severities, its review mark, the kind
    # of a person's decision on it, its id and time.
    verdict_model_severity = models.CharField(max_length=8, blank=True, editable=False)
    verdict_policy_severity = models.CharField(max_length=8, blank=True, editable=False)
    verdict_needs_review = models.BooleanField(default=False, editable=False)
    verdict_decision_kind = models.CharField(max_length=8, blank=True, editable=False)
    verdict_report_id = models.BigIntegerField(null=True, blank=True, editable=False)
    verdict_report_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The latest run's.
    verdict_run_id = models.UUIDField(null=True, blank=True, editable=False)
    verdict_run_status = models.CharField(max_length=16, blank=True, editable=False)
    # On the review desk: the latest report, undecided, is marked for review, changed the
    # verdict since the previous one, or the release's data is incomplete.
    verdict_awaits_review = models.BooleanField(default=False, editable=False)
    # The severity is the policy's own: no model filed on the data the release has now (the
    # gate's verdict, `release_verdict.gate_verdict`; issue 39).
    verdict_by_policy = models.BooleanField(default=False, editable=False)

    class Meta:
        abstract = True
        indexes = [
            # The list sorted by risk or by last assessment, filtered by severity or run state.
            models.Index(fields=["verdict_rank", "created_at", "id"], name="release_verdict_rank"),
            models.Index(fields=["verdict_report_at", "id"], name="release_verdict_report_at"),
            models.Index(fields=["verdict_severity"], name="release_verdict_severity"),
            models.Index(fields=["verdict_run_status"], name="release_verdict_run_status"),
            # The review desk: a few releases among many.
            models.Index(
                fields=["verdict_awaits_review"],
                condition=Q(verdict_awaits_review=True),
                name="release_awaits_review",
            ),
        ]
