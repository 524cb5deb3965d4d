"""The verdict a page shows, stored on the release (issue 39) rather than recomputed per row.

Computing the severity that counts inside the list's query (a CASE over the latest report's
subqueries, once per release) made the sort by risk, home and the review desk take seconds at
10,000 releases. So the verdict is computed for one release at a time, by the one function
that decides it (`release_verdict.verdict_of`: the reports', decisions' and runs' verdict, or
the policy's where no model filed on the data the release has now, issue 37), and its output is
written onto the release's `verdict_*` columns, which the lists filter, sort and count by
(indexed). So a list, a count, the desk, the release page, the verdict API and the gate say the
same severity. The policy's verdict reads the release's history (6 queries, 17 to 270 ms at a
team's size), so a write refreshes once however many rows it saves (`once`).

`refresh_stored_verdict(release)` is the one door: every write that can change the verdict
calls it in the same transaction (a report filed, a decision, a run started, claimed, ended,
failed or cancelled, release data or a source that changed, a row deleted; `releases/apps.py`
connects the model signals for the writes that go through `save()` and `delete()`, and the run
services call it after their `update()`s). Inside `once()` (a service that writes several rows
of one release: `upsert_release`, the ingestions) the refreshes asked for are made once a
release, at the block's end, still in its transaction. `refresh_all` does the same for many
releases at once (after `migrate`, the benchmarks' bulk loads).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

from django.db import transaction
from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber

from releases.models import DATA_FIELDS, Conversation, Release, ReviewDecision, RiskReport
from releases.release_verdict import ReleaseVerdict, build_verdict, gate_verdict, verdict_of
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
    "verdict_by_policy",
)
P = ParamSpec("P")
T = TypeVar("T")
# The releases whose refresh waits for the end of the `once()` block (None: outside one).
_pending: ContextVar[dict[int, Release | int] | None] = ContextVar(
    "stored_verdict_pending", default=None
)


def computed_values(release: Release) -> dict[str, Any]:
    """What the release's `verdict_*` columns should hold now: `verdict_of`, the gate's verdict
    (three queries; where no model filed on the data now, one for the data's fingerprint and
    the policy's judgement), and one more for the latest two reports' severity and review
    mark."""
    latest_two = list(
        RiskReport.objects.filter(release=release)
        .order_by("-filed_at", "-id")
        .values_list("severity", "needs_review")[:2]
    )
    return values_of(release, verdict_of(release), latest_two)


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
        "verdict_by_policy": verdict.by_policy,
    }


def refresh_stored_verdict(release: Release | int | None) -> None:
    """Write the release's verdict, as computed now, onto its row (and onto the instance
    given). Call it in the transaction of the write that changed the verdict; inside `once()`
    it is made at the block's end."""
    if release is None:
        return
    pending = _pending.get()
    if pending is None:
        _refresh_now(release)
        return
    pk = release.pk if isinstance(release, Release) else release
    if pk is not None and not isinstance(pending.get(pk), Release):
        pending[pk] = release  # the instance, when one is given, gets the values too


def _refresh_now(release: Release | int, *, reread: bool = False) -> None:
    """`reread`: read the row again (a deferred refresh: the instance given may predate the
    block's later writes), and give the instance the values too."""
    with transaction.atomic():
        row = (
            release
            if isinstance(release, Release) and not reread
            else Release.objects.select_related("service")
            .filter(pk=release.pk if isinstance(release, Release) else release)
            .first()
        )
        if row is None or row.pk is None:
            return  # deleted meanwhile (a release's rows go before it)
        values = computed_values(row)
        Release.objects.filter(pk=row.pk).update(**values)
        for target in {id(row): row, id(release): release}.values():
            if isinstance(target, Release):
                for name, value in values.items():
                    setattr(target, name, value)


@contextmanager
def once() -> Iterator[None]:
    """One transaction in which the stored verdict is refreshed once a release, at its end,
    however many of its rows were written (a release saved, then its ingestion recorded)."""
    if _pending.get() is not None:
        yield  # an outer block refreshes
        return
    pending: dict[int, Release | int] = {}
    token = _pending.set(pending)
    try:
        with transaction.atomic():
            yield
            _pending.set(None)
            for release in pending.values():
                _refresh_now(release, reread=True)
    finally:
        _pending.reset(token)


@contextmanager
def never_read() -> Iterator[None]:
    """Writes whose stored verdict nobody reads, since they are rolled back (the backtest's
    scratch service): the refreshes they ask for are dropped, where each would judge the
    release with its whole history (issue 39: the backtest carries history from tag to tag)."""
    token = _pending.set({})
    try:
        yield
    finally:
        _pending.reset(token)


def refreshed_once(function: Callable[P, T]) -> Callable[P, T]:
    """`function` run inside `once()`."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with once():
            return function(*args, **kwargs)

    return wrapper


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
        RiskReport.objects.filter(release_id__in=pks).select_related("policy", "conversation"),
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
        verdict = gate_verdict(row, report, build_verdict(row, report, decision, runs.get(row.pk)))
        latest_two = [(r.severity, r.needs_review) for r in found]
        for name, value in values_of(row, verdict, latest_two).items():
            setattr(row, name, value)
        yield row
