"""The release's summary (what the agent and the policy read) derived from its detail.

Release.changes, test_results and deployment_metrics keep the specification's shape; each is
rewritten from the detail tables when a source of its kind is ingested, and left as it is when
the release has no detail of that kind (a release typed in by hand keeps its figures). Big detail
stays out: counts, plus at most MAX_NAMES failing or flaky tests and MAX_CHANGES changes, the
riskiest first, by name.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import Count, Q, Sum
from django.utils.dateparse import parse_datetime

from releases import schemas, verdicts
from releases.models import Release
from risk.settings import PolicySettings
from sources.models import Commit, MetricSample, MetricWindow, SourceKind, TestCase, TestStatus
from sources.parsers.junit import XFAIL_TYPE
from sources.parsers.openmetrics import (
    MetricSampleRecord,
    MetricValueError,
    RequestCounter,
    Scaled,
    SummaryNames,
    step_series,
    summarize,
)

MAX_NAMES = 25
MAX_CHANGES = 40

# Prometheus' window figures are stored as `<key>:window` and its per-step samples under the
# summary's keys (services/metrics.py); files use the exporters' names. All give the figures,
# the window's own figure first.
NAMES = SummaryNames(
    error_rate=(
        Scaled("error_rate:window"),
        Scaled("error_rate"),
        *SummaryNames().error_rate,
    ),
    response_time_p95=(
        Scaled("response_time_p95:window"),
        Scaled("response_time_p95"),
        *SummaryNames().response_time_p95,
    ),
)

SUMMARY_METRICS = ("error_rate", "response_time_p95")


def names_for(service: str, settings: PolicySettings | None = None) -> SummaryNames:
    """The names that give a service's figures: its own (the policy's `metric_names`, the
    policy in force unless given) before the defaults."""
    settings = settings or verdicts.settings_of(verdicts.current_policy())
    own = settings.metric_names_for(service)
    return NAMES.with_own(
        error_rate=[Scaled(n.name, n.factor) for n in own.error_rate_gauges],
        request_counters=[
            RequestCounter(c.name, c.status_label, c.error_pattern) for c in own.request_counters
        ],
        response_time_p95=[Scaled(n.name, n.factor) for n in own.p95_gauges],
        latency_histograms=[Scaled(n.name, n.factor) for n in own.latency_histograms],
    )


# A window holds at most this many samples read for its series (a 30-minute window scraped
# every 15 s by an exporter with 12 buckets and 10 status codes is about 3,000).
MAX_WINDOW_SAMPLES = 200_000


def window_records(release_ids: list[int], window: str) -> dict[int, list[MetricSampleRecord]]:
    """The stored samples of these releases' windows, by release, in one query."""
    rows = (
        MetricSample.objects.filter(release_id__in=release_ids, window=window)
        .order_by("release_id", "timestamp", "id")
        .values_list("release_id", "name", "labels", "timestamp", "value")
    )
    found: dict[int, list[MetricSampleRecord]] = {release_id: [] for release_id in release_ids}
    for release_id, name, labels, timestamp, value in rows.iterator(chunk_size=5000):
        kept = found[release_id]
        if len(kept) < MAX_WINDOW_SAMPLES:
            kept.append(MetricSampleRecord(name, tuple(sorted(labels.items())), timestamp, value))
    return found


def window_series(
    release_ids: list[int], window: str, names: SummaryNames
) -> dict[int, dict[str, list[float]]]:
    """The summary's figures step by step in one window of each release (`step_series`:
    rates of counters, quantiles of histograms, gauges as they are): what the metric judge
    compares, for the policy, the Metrics tab and the drill-down alike."""
    names = _series_names(names)
    return {
        release_id: step_series(records, names)
        for release_id, records in window_records(release_ids, window).items()
    }


def windows_series(
    release_id: int, earlier_ids: list[int], names: SummaryNames
) -> tuple[dict[str, dict[str, list[float]]], dict[int, dict[str, list[float]]]]:
    """`window_series` of both windows of a release and of the release window of earlier ones,
    in one query (the release summary's history reads them together): (by window, by earlier
    release)."""
    rows = (
        MetricSample.objects.filter(
            Q(release_id=release_id) | Q(release_id__in=earlier_ids, window=MetricWindow.RELEASE)
        )
        .order_by("release_id", "window", "timestamp", "id")
        .values_list("release_id", "window", "name", "labels", "timestamp", "value")
    )
    found: dict[tuple[int, str], list[MetricSampleRecord]] = defaultdict(list)
    # Django's per-value converters (a JSON parse of every row's labels, a datetime parse of
    # every timestamp) were most of the summary's time; the same labels and scrape times come
    # back on row after row, so each distinct one is converted once.
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for owner, window, name, labels, timestamp, value in cursor.fetchall():
            kept = found[(owner, window)]
            if len(kept) < MAX_WINDOW_SAMPLES:
                kept.append(MetricSampleRecord(name, _labels(labels), _timestamp(timestamp), value))
    names = _series_names(names)
    own = {
        window: step_series(found.get((release_id, window), []), names)
        for window in MetricWindow.values
    }
    earlier = {
        pk: step_series(found.get((pk, MetricWindow.RELEASE), []), names) for pk in earlier_ids
    }
    return own, earlier


@lru_cache(maxsize=4096)
def _label_items(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(json.loads(text).items()))


def _labels(stored: Any) -> tuple[tuple[str, str], ...]:
    """A row's labels as the backend hands them over: JSON text (SQLite, psycopg's text
    loader) or already a dict."""
    if isinstance(stored, str):
        return _label_items(stored)
    return tuple(sorted((stored or {}).items()))


@lru_cache(maxsize=4096)
def _parsed_time(text: str) -> datetime:
    parsed = parse_datetime(text)
    if parsed is None:
        raise ValueError(f"not a stored timestamp: {text!r}")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _timestamp(stored: Any) -> datetime | None:
    """A row's timestamp as the backend hands it over: text in UTC (SQLite) or a datetime."""
    if isinstance(stored, str):
        return _parsed_time(stored)
    return stored


def _series_names(names: SummaryNames) -> SummaryNames:
    # A window's one figure (`<key>:window`) is no series.
    return replace(
        names,
        error_rate=tuple(n for n in names.error_rate if not n.name.endswith(":window")),
        response_time_p95=tuple(
            n for n in names.response_time_p95 if not n.name.endswith(":window")
        ),
    )


def sources_of(metric: str) -> tuple[Scaled, ...]:
    """The stored names that give `metric` as a series (Prometheus' per-step samples under the
    key itself, or the exporters' gauges), each with its factor to the key's unit; any other
    metric is its own name. A window's single figure (`<key>:window`) is not a series."""
    known = getattr(NAMES, metric, None) if metric in SUMMARY_METRICS else None
    if known is None:
        return (Scaled(metric),)
    return tuple(scaled for scaled in known if not scaled.name.endswith(":window"))


# Which commits a long range lists first: breaking ones, then those that change behaviour.
_TYPE_RANK = {"revert": 1, "feat": 2, "fix": 3, "perf": 4, "refactor": 5}


def refresh(release: Release, kind: str) -> list[str]:
    """Rewrite the summary field of this kind of source from the detail; the fields changed."""
    if kind == SourceKind.COMMITS:
        release.changes = changes(release)
        fields = ["changes"]
    elif kind == SourceKind.JUNIT:
        release.test_results = test_results(release)
        fields = ["test_results"]
    elif kind == SourceKind.METRICS:
        release.deployment_metrics = deployment_metrics(release)
        fields = ["deployment_metrics"]
    else:
        return []
    try:
        release.save(update_fields=[*fields, "updated_at"])
    except ValidationError as error:
        # A figure the release's rules refuse (releases/schemas.py: a p95 past an hour, say)
        # is the sender's to hear about: the callers answer it as a 422 and store nothing.
        raise MetricValueError(" ".join(error.messages)) from None
    return fields


def changes(release: Release) -> list[str] | None:
    """One line per commit (merges left out). A range longer than MAX_CHANGES lists its
    MAX_CHANGES riskiest, riskiest first, ranked over the whole range: the first suspects of
    the failures, then their other suspects, then breaking commits, those that change
    behaviour, the larger and the newer; after a line with the counts by type and how many
    are left out (the Commits tab has every one)."""
    commits = list(
        Commit.objects.filter(release=release)
        .annotate(lines=Sum("files__added") + Sum("files__deleted"), file_count=Count("files"))
        .order_by("authored_at", "sha")
    )
    kept = [commit for commit in commits if not commit.is_merge]
    if not kept:
        return None
    lines = [f"{commit.subject} ({commit.sha[:7]})" for commit in kept]
    if len(kept) <= MAX_CHANGES:
        return lines
    suspected = suspect_places(release)
    ranked = sorted(
        range(len(kept)),
        key=lambda i: (
            suspected.get(kept[i].sha, len(suspected) + 1),
            not kept[i].breaking,
            _TYPE_RANK.get(kept[i].change_type, 9),
            -(kept[i].lines or 0),
            -i,  # the newer first: `kept` is oldest first
        ),
    )[:MAX_CHANGES]
    by_type = Counter(commit.change_type for commit in kept)
    counts = ", ".join(f"{count} {kind}" for kind, count in by_type.most_common())
    breaking = sum(commit.breaking for commit in kept)
    among = sum(commit.sha in suspected for commit in kept)
    suspects = (
        f", the {among} suspect{'s' if among != 1 else ''} of failures first" if among else ""
    )
    head = (
        f"{len(kept)} commits ({counts}; {breaking} breaking); "
        f"the {MAX_CHANGES} riskiest are listed, riskiest first{suspects}; "
        f"{len(kept) - MAX_CHANGES} left out"
    )
    return [head, *(lines[i] for i in ranked)]


def rank_changes_again(release: Release) -> None:
    """After the failures' suspects are ranked: a long range's list puts them first."""
    if Commit.objects.filter(release=release).count() > MAX_CHANGES:
        refresh(release, SourceKind.COMMITS)


def suspect_places(release: Release) -> dict[str, int]:
    """Each commit's best place among the failures' suspects (0: some failure's first)."""
    places: dict[str, int] = {}
    stored = TestCase.objects.filter(release=release, suspects__isnull=False).values_list(
        "suspects", flat=True
    )
    for suspects in stored:
        ranked = suspects.get("ranked") if isinstance(suspects, dict) else None
        for place, suspect in enumerate(ranked if isinstance(ranked, list) else []):
            sha = suspect.get("sha") if isinstance(suspect, dict) else None
            if isinstance(sha, str):
                places[sha] = min(places.get(sha, place), place)
    return places


def test_results(release: Release) -> dict[str, Any] | None:
    """Counts by each test's last attempt, with the failing and flaky tests by name.

    A test counts once, as its last run went: passed (or flaky: it passed on a rerun), failed
    (failure or error) or skipped. It is flaky when its last run passed after an earlier one
    failed, in the same report or an earlier one."""
    rows = (
        TestCase.objects.filter(release=release)
        .order_by("suite", "classname", "name", "invocation", "attempt")
        .values_list("suite", "classname", "name", "invocation", "status", "failure_type")
        .iterator(chunk_size=5000)
    )
    counts = Counter[str]()
    failing: list[str] = []
    flaky: list[str] = []
    current: tuple[str, str, str, int] | None = None
    last_status, last_type, failed_before, earlier_failed = "", "", False, False

    def close() -> None:
        if current is None:
            return
        label = f"{current[1]}::{current[2]}" if current[1] else current[2]
        if last_status in (TestStatus.FAILED, TestStatus.ERROR):
            counts["failed"] += 1
            if len(failing) < MAX_NAMES:
                failing.append(label)
        elif last_status == TestStatus.SKIPPED:
            # pytest's expected failure is written as a skip of its own type.
            counts["xfailed" if last_type == XFAIL_TYPE else "skipped"] += 1
        else:
            counts["passed"] += 1
            if last_status == TestStatus.FLAKY or earlier_failed:
                counts["flaky"] += 1
                if len(flaky) < MAX_NAMES:
                    flaky.append(label)

    # Each invocation of a test counts (TestNG writes a data-driven test once per invocation).
    for suite, classname, name, invocation, status, failure_type in rows:
        key = (suite, classname, name, invocation)
        if key != current:
            close()
            current, failed_before = key, False
        earlier_failed = failed_before
        failed_before = failed_before or status in (TestStatus.FAILED, TestStatus.ERROR)
        last_status, last_type = status, failure_type
    close()
    if current is None and not release.ingestions.filter(kind=SourceKind.JUNIT).exists():
        return None
    # Reports that hold no test at all: none ran (zeros, a signal of its own), not missing.
    results: dict[str, Any] = {
        "passed": counts["passed"],
        "failed": counts["failed"],
        "skipped": counts["skipped"],
        "flaky": counts["flaky"],
        "failing_tests": failing,
        "flaky_tests": flaky,
    }
    # Said only when there are some, so a release of plain reports reads as it did.
    if counts["xfailed"]:
        results["xfailed"] = counts["xfailed"]
    reports = [
        ingestion.counts or {}
        for ingestion in release.ingestions.filter(kind=SourceKind.JUNIT).only("counts")
    ]
    not_written = sum(counts.get("not_in_test_cases", 0) for counts in reports)
    if not_written:
        # pytest 9's subtests: in the header's count, not written as test cases.
        results["not_in_test_cases"] = not_written
        failed_subtests = sum(counts.get("failed_subtests", 0) for counts in reports)
        if failed_subtests:
            results["failed_subtests"] = min(failed_subtests, not_written)
    if any(counts.get("interrupted") for counts in reports):
        results["interrupted"] = True
    return results


SIGNIFICANT_DIGITS = 4


def _significant(value: Any) -> Any:
    """A figure to the digits its sources carry. The mean of 60 gauge samples came out as
    1352.173333 ms, which the policy's sentences and the model then repeated digit for digit."""
    if isinstance(value, float) and value:
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    return value


def _within_bounds(key: str, value: Any) -> None:
    """The release's rules bound each figure (releases/schemas.py): checked before the figure
    is rounded, or a p95 of 3,600,001 ms would round to the limit and pass (issue 37)."""
    metric = schemas.METRICS.get(key)
    if metric is not None and isinstance(value, int | float) and value > metric.maximum:
        raise MetricValueError(
            f"{key} is {value:g}: above {metric.maximum:g}, {metric.description}"
        )


def deployment_metrics(release: Release) -> dict[str, Any] | None:
    """Error rate and p95 of the release's window and, as `<key>_baseline`, of the baseline's.
    Raises openmetrics.MetricValueError on a figure its key cannot hold."""
    if not release.ingestions.filter(kind=SourceKind.METRICS).exists():
        return None
    names = names_for(release.service.slug)
    figures: dict[str, Any] = {}
    for window in MetricWindow:
        samples = window_records([release.pk], window)[release.pk]
        suffix = "" if window == MetricWindow.RELEASE else "_baseline"
        for key, value in summarize(samples, names).as_dict().items():
            _within_bounds(f"{key}{suffix}", value)
            figures[f"{key}{suffix}"] = _significant(value)
    # A figure that could not be computed from what arrived is missing, never zero.
    figures.setdefault("error_rate", None)
    figures.setdefault("response_time_p95", None)
    return figures
