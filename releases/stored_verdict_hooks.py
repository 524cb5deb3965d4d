"""When the stored verdict (releases/stored_verdict.py) is written: after every `save()` and
`delete()` of a row the verdict reads, in the same transaction as that write when the writer
holds one (the services do), and once after `migrate` for the rows it has not been computed
for yet (the releases that were there when the columns were added). Connected in
`releases/apps.py`.

The writes that go through `QuerySet.update()` instead (a run claimed, ended or failed:
`assessments/services.py`) call `refresh_stored_verdict` themselves.
"""

from __future__ import annotations

from typing import Any

from django.db import OperationalError, ProgrammingError
from django.db.models.signals import post_delete, post_migrate, post_save

from releases.models import DATA_FIELDS, Conversation, Release, ReviewDecision, RiskReport
from releases.stored_verdict import refresh_all, refresh_stored_verdict

# Fields whose change cannot change a verdict: a save naming only these refreshes nothing.
_REPORT_IDLE = frozenset({"pipeline_waiting_since"})
_DECISION_IDLE = frozenset({"scenario_id"})
_RUN_VERDICT_FIELDS = frozenset({"status", "created_at", "release"})


def _named(update_fields: Any) -> frozenset[str] | None:
    return frozenset(update_fields) if update_fields is not None else None


def report_saved(instance: RiskReport, raw: bool = False, **kwargs: Any) -> None:
    fields = _named(kwargs.get("update_fields"))
    if not raw and (fields is None or not fields <= _REPORT_IDLE):
        refresh_stored_verdict(instance.release_id)


def report_deleted(instance: RiskReport, **_: Any) -> None:
    refresh_stored_verdict(instance.release_id)


def _release_of_decision(decision: ReviewDecision) -> int | None:
    found = RiskReport.objects.filter(pk=decision.report_id).values_list("release_id", flat=True)
    return found.first()


def decision_saved(instance: ReviewDecision, raw: bool = False, **kwargs: Any) -> None:
    fields = _named(kwargs.get("update_fields"))
    if not raw and (fields is None or not fields <= _DECISION_IDLE):
        refresh_stored_verdict(_release_of_decision(instance))


def decision_deleted(instance: ReviewDecision, **_: Any) -> None:
    refresh_stored_verdict(_release_of_decision(instance))


def run_saved(instance: Conversation, raw: bool = False, **kwargs: Any) -> None:
    fields = _named(kwargs.get("update_fields"))
    if raw or instance.release_id is None:
        return
    if fields is None or fields & _RUN_VERDICT_FIELDS:
        refresh_stored_verdict(instance.release_id)


def run_deleted(instance: Conversation, **_: Any) -> None:
    if instance.release_id is not None:
        refresh_stored_verdict(instance.release_id)


def release_saved(instance: Release, created: bool, raw: bool = False, **kwargs: Any) -> None:
    """New data can put a release's report on the desk, or take it off (missing data), and
    changes the policy's verdict, which is a new release's (it has no report)."""
    fields = _named(kwargs.get("update_fields"))
    if raw:
        return
    if created or fields is None or fields & frozenset(DATA_FIELDS):
        refresh_stored_verdict(instance)


# The sources a release's data fingerprint hashes (releases/data_fingerprint.py): a new one
# can make the release's report stale, and the policy's verdict the gate's.
_SOURCE_KINDS = frozenset({"commits", "junit", "metrics"})


def source_saved(instance: Any, raw: bool = False, **kwargs: Any) -> None:
    """An ingestion (sources.models.Ingestion, connected by sources/apps.py): its content's
    hash is part of the release's data fingerprint; one still being read is not."""
    fields = _named(kwargs.get("update_fields"))
    if raw or instance.kind not in _SOURCE_KINDS or instance.content_hash.startswith("reading:"):
        return
    if fields is None or "content_hash" in fields:
        refresh_stored_verdict(instance.release_id)


def source_deleted(instance: Any, **_: Any) -> None:
    if instance.kind in _SOURCE_KINDS:
        refresh_stored_verdict(instance.release_id)


def fill_after_migrate(**_: Any) -> None:
    """The releases whose verdict was never computed (an empty state): those that were there
    when the columns were added."""
    try:
        refresh_all(Release.objects.filter(verdict_state=""))
    except (OperationalError, ProgrammingError):
        return  # migrated back to before the columns: nothing to fill


def connect(sender: Any) -> None:
    uid = "stored_verdict"
    post_save.connect(report_saved, sender=RiskReport, dispatch_uid=f"{uid}.report_saved")
    post_delete.connect(report_deleted, sender=RiskReport, dispatch_uid=f"{uid}.report_deleted")
    post_save.connect(decision_saved, sender=ReviewDecision, dispatch_uid=f"{uid}.decision")
    post_delete.connect(
        decision_deleted, sender=ReviewDecision, dispatch_uid=f"{uid}.decision_deleted"
    )
    post_save.connect(run_saved, sender=Conversation, dispatch_uid=f"{uid}.run_saved")
    post_delete.connect(run_deleted, sender=Conversation, dispatch_uid=f"{uid}.run_deleted")
    post_save.connect(release_saved, sender=Release, dispatch_uid=f"{uid}.release_saved")
    post_migrate.connect(fill_after_migrate, sender=sender, dispatch_uid=f"{uid}.migrate")
