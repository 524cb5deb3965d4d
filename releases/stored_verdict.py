"""The verdict a page shows, stored on the release (issue 39) rather than recomputed per row.

Computing the severity that counts inside the list's query (a CASE over the latest report's
subqueries, once per release) made the sort by risk, home and the review desk take seconds at
10,000 releases. So the verdict is computed for one release at a time, by the one function
that decides it (`release_verdict.build_verdict`, over the rows `recorded_verdict` reads),
and its output is written onto the release's `verdict_*` columns, which the lists filter, sort
and count by (indexed). What is stored is the recorded verdict: the reports', decisions' and
runs'. Where no model filed on the release's data now, the gate (`verdict_of`: the verdict
API, `manage.py verdict`, the client and the release page) goes by the policy's verdict
instead (issue 37), which reads the release's history; the lists do not store that one yet.

`refresh_stored_verdict(release)` is the one door: every write that can change the verdict
calls it in the same transaction (a report filed, a decision, a run started, claimed, ended,
failed or cancelled, release data that changed, a row deleted; `releases/apps.py` connects
the model signals for the writes that go through `save()` and `delete()`, and the run
services call it after their `update()`s). `refresh_all` does the same for many releases at
once (the data migration, a new policy version, the benchmarks' bulk loads).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from django.db import transaction
from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber

from releases.models import DATA_FIELDS, Conversation, Release, ReviewDecision, RiskReport
from releases.release_verdict import ReleaseVerdict, build_verdict, recorded_verdict
from releases.severity import SEVERITY_RANK

BATCH = 500
STORED_FIELDS = (
    "verdict_severity",
    "verdict_rank",
    "verdict_state",
    "verdict_model_severity",
    "verdict_policy_severity",
    "verdict_needs_review",
    "verdict_decision_kind",
    "verdict_report_id",
    "verdict_report_at",
    "verdict_run_id",
    "verdict_run_status",
    "verdict_awaits_review",
)


def computed_values(release: Release) -> dict[str, Any]:
    """What the release's `verdict_*` columns should hold now: `recorded_verdict` (three queries)
    and one more for the latest two reports' severity and review mark."""
    latest_two = list(
        RiskReport.objects.filter(release=release)
        .order_by("-filed_at", "-id")
        .values_list("severity", "needs_review")[:2]
    )
    return values_of(release, recorded_verdict(release), latest_two)


def values_of(
    release: Release, verdict: ReleaseVerdict, latest_two: list[tuple[str, bool]]
) -> dict[str, Any]:
    """The columns from the verdict and the latest two reports' (severity, needs_review)."""
    needs_review = bool(latest_two) and latest_two[0][1]
    awaiting = (
        verdict.report_id is not None
        and verdict.decision_kind is None
        and (
            needs_review
            or (len(latest_two) > 1 and latest_two[1][0] != latest_two[0][0])
            or any(getattr(release, name) is None for name in DATA_FIELDS)
        )
    )
    return {
        "verdict_severity": verdict.severity or "",
        "verdict_rank": SEVERITY_RANK.get(verdict.severity or ""),
        "verdict_state": str(verdict.state),
        "verdict_model_severity": verdict.model_severity or "",
        "verdict_policy_severity": verdict.policy_severity or "",
        "verdict_needs_review": needs_review,
        "verdict_decision_kind": verdict.decision_kind or "",
        "verdict_report_id": verdict.report_id,
        "verdict_report_at": verdict.report_filed_at,
        "verdict_run_id": uuid.UUID(verdict.run_id) if verdict.run_id else None,
        "verdict_run_status": verdict.run_status or "",
        "verdict_awaits_review": awaiting,
    }


def refresh_stored_verdict(release: Release | int | None) -> None:
    """Write the release's verdict, as computed now, onto its row (and onto the instance
    given). Call it in the transaction of the write that changed the verdict."""
    if release is None:
        return
    with transaction.atomic():
        row = (
            release if isinstance(release, Release) else Release.objects.filter(pk=release).first()
        )
        if row is None or row.pk is None:
            return  # deleted meanwhile (a release's rows go before it)
        values = computed_values(row)
        Release.objects.filter(pk=row.pk).update(**values)
        for name, value in values.items():
            setattr(row, name, value)


def refresh_all(releases: QuerySet[Release] | None = None) -> int:
    """`refresh_stored_verdict` for many releases, a transaction per batch (the releases there
    before the columns, the benchmarks' bulk loads). The rows `recorded_verdict` reads for one
    release are read for a batch at once (the newest of each by a window function) and the
    verdict built by the same `build_verdict`; `stored_verdict_test` checks both ways agree.
    Returns how many releases were written."""
    queryset = releases if releases is not None else Release.objects.all()
    ids = list(queryset.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), BATCH):
        with transaction.atomic():
            rows = list(Release.objects.filter(pk__in=ids[start : start + BATCH]))
            # One UPDATE a row: bulk_update's CASE per column cost more to build than these.
            for row in _refreshed(rows):
                values = {name: getattr(row, name) for name in STORED_FIELDS}
                Release.objects.filter(pk=row.pk).update(**values)
    return len(ids)


def _newest(queryset: QuerySet[Any], parent: str, order: tuple[str, ...], keep: int) -> list[Any]:
    """The newest `keep` rows of each `parent`, newest first."""
    rank = Window(
        RowNumber(),
        partition_by=F(parent),
        order_by=[F(name.lstrip("-")).desc() for name in order],
    )
    return list(queryset.annotate(rank=rank).filter(rank__lte=keep).order_by(parent, "rank"))


def _refreshed(rows: list[Release]) -> Iterator[Release]:
    pks = [row.pk for row in rows]
    reports: dict[int, list[RiskReport]] = {}
    for report in _newest(
        RiskReport.objects.filter(release_id__in=pks).select_related("policy"),
        "release_id",
        ("-filed_at", "-id"),
        2,
    ):
        reports.setdefault(report.release_id, []).append(report)
    latest_ids = [found[0].pk for found in reports.values()]
    decisions = {
        decision.report_id: decision
        for decision in _newest(
            ReviewDecision.objects.filter(report_id__in=latest_ids).select_related("reviewer"),
            "report_id",
            ("-created_at", "-id"),
            1,
        )
    }
    runs = {
        run.release_id: run
        for run in _newest(
            Conversation.objects.filter(release_id__in=pks),
            "release_id",
            ("-created_at", "-id"),
            1,
        )
    }
    for row in rows:
        found = reports.get(row.pk, [])
        report = found[0] if found else None
        decision = decisions.get(report.pk) if report is not None else None
        verdict = build_verdict(row, report, decision, runs.get(row.pk))
        latest_two = [(r.severity, r.needs_review) for r in found]
        for name, value in values_of(row, verdict, latest_two).items():
            setattr(row, name, value)
        yield row
