"""Writes of releases and the policy. A run's writes (its messages, events and life cycle) are
in assessments/services.py, its report's in assessments/filing.py (the policy's verdict on a
stored release reads the sources app's history), a reviewer's decisions in review/services.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from releases import stored_verdict
from releases.models import Release, RiskPolicy, RiskReport
from risk.policy import PolicySettings, threshold_order_problems


def create_release(
    *,
    version: str,
    title: str = "",
    changes: Sequence[str] | None = None,
    test_results: dict[str, Any] | None = None,
    deployment_metrics: dict[str, Any] | None = None,
    created_at: datetime | None = None,
) -> Release:
    """Create a release after validating its data (None means missing)."""
    release = Release(
        version=version,
        title=title,
        # Any other type goes to validation as it is (list() of a dict would keep its keys).
        changes=list(changes) if isinstance(changes, list | tuple) else changes,
        test_results=test_results,
        deployment_metrics=deployment_metrics,
    )
    if created_at is not None:
        release.created_at = created_at
    release.full_clean()
    release.save()
    return release


def new_policy_version(
    settings: PolicySettings, *, note: str = "", user: AbstractBaseUser | None = None
) -> RiskPolicy:
    """Save `settings` as the next version of the risk policy (versions are never edited).
    Thresholds out of order are refused (ValueError, saying which)."""
    if problems := threshold_order_problems(settings):
        raise ValueError(" ".join(problems))
    with transaction.atomic():
        latest = RiskPolicy.objects.select_for_update().order_by("-version").first()
        policy = RiskPolicy.objects.create(
            version=(latest.version if latest else 0) + 1,
            thresholds=settings.model_dump(mode="json"),
            note=note,
            created_by=user if user is not None and user.pk else None,
        )
        # The releases whose stored severity is the policy's own (no model filed on their data
        # now) are judged again by this version; a report's severity stays what it was filed.
        stored_verdict.refresh_all(Release.objects.filter(verdict_by_policy=True))
        return policy


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def note_pipeline_waiting(report_id: int) -> datetime | None:
    """A pipeline waits for a person's decision on this report: since when (the first wait's
    time stands, so a re-run job does not look newer than it is). None when the report is
    gone."""
    now = timezone.now()
    RiskReport.objects.filter(pk=report_id, pipeline_waiting_since__isnull=True).update(
        pipeline_waiting_since=now
    )
    return (
        RiskReport.objects.filter(pk=report_id)
        .values_list("pipeline_waiting_since", flat=True)
        .first()
    )
