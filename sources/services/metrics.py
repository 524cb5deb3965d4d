"""Metric samples (a file, or Prometheus) into rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from releases import verdicts
from releases.models import Release
from releases.stored_verdict import refreshed_once
from sources import summary
from sources.models import (
    MetricSample,
    MetricWindow,
    SourceKind,
)
from sources.parsers import prometheus
from sources.parsers.openmetrics import MetricSampleRecord, MetricValueError, file_release_metrics
from sources.parsers.windows import baseline_window, release_window
from sources.services.base import (
    BATCH,
    MAX_SAMPLES,
    Ingested,
    IngestError,
    Origin,
    _check_text,
    _digest,
    _record,
)

# ---- metrics -----------------------------------------------------------------------------------


@refreshed_once
def ingest_metrics(
    release: Release,
    samples: Iterable[MetricSampleRecord],
    origin: Origin,
    *,
    window: str = MetricWindow.RELEASE,
    file_names: Sequence[str] = (),
    allow_empty: bool = False,
    note: str = "",
) -> Ingested:
    """Metric samples of the release's window or its baseline's. No samples is refused unless
    `allow_empty` (Prometheus answering nothing: the figures are then *missing*). A figure its
    key cannot hold (an error rate outside 0..1, a negative p95) is refused (422), nothing
    stored. `note` says in the counts how the window was read, when it is not the usual way.

    Sent again with other content (a deploy time given since, a corrected file), the new
    samples replace the earlier ones of the same window and metric names: one reading per
    metric and window, never two added up (issue 37). The same content twice is one reading."""
    if window not in MetricWindow.values:
        raise IngestError(f"window must be {' or '.join(MetricWindow.values)}, not {window!r}.")
    samples = list(samples)
    if not samples and not allow_empty:
        raise IngestError("No metric samples in what was sent.", 422)
    if len(samples) > MAX_SAMPLES:
        raise IngestError(f"{len(samples):,} samples: at most {MAX_SAMPLES:,} at once.", 413)
    content_hash = _digest(
        [window, *[(s.name, s.labels, str(s.timestamp), s.value) for s in samples]]
    )
    with transaction.atomic():
        ingestion, created = _record(
            release, SourceKind.METRICS, content_hash, origin, file_names, {}
        )
        if not created:
            return Ingested(ingestion, False)
        MetricSample.objects.filter(
            release=release, window=window, name__in={sample.name[:200] for sample in samples}
        ).delete()
        MetricSample.objects.bulk_create(
            [
                MetricSample(
                    release=release,
                    ingestion=ingestion,
                    name=_check_text("a metric name", sample.name)[:200],
                    timestamp=sample.timestamp,
                    value=sample.value,
                    labels=dict(sample.labels),
                    window=window,
                )
                for sample in samples
            ],
            batch_size=BATCH,
        )
        ingestion.counts = {
            "samples": len(samples),
            "missing": sum(sample.value is None for sample in samples),
            "window": window,
            **({"note": note} if note else {}),
        }
        ingestion.save(update_fields=["counts"])
        try:
            summary.refresh(release, SourceKind.METRICS)
        except MetricValueError as exc:
            raise IngestError(f"Refused: {exc}.", 422) from None
    return Ingested(ingestion, True)


# ---- Prometheus --------------------------------------------------------------------------------


def previous_release(release: Release) -> Release | None:
    """The service's release deployed last before this one."""
    if release.deployed_at is None:
        return None
    return (
        Release.objects.filter(service=release.service, deployed_at__lt=release.deployed_at)
        .order_by("-deployed_at")
        .first()
    )


@refreshed_once
def ingest_prometheus(
    release: Release,
    client: prometheus.PrometheusClient,
    origin: Origin,
    *,
    config: prometheus.MetricsConfig | None = None,
    now: datetime | None = None,
) -> list[Ingested]:
    """The release's window (from its deploy time) and its baseline's (the previous release's,
    or the same window a week earlier) queried from Prometheus and stored, one ingestion per
    window. The per-step samples (range queries) are stored under the summary's keys
    (`error_rate`, `response_time_p95` in ms: what a judge of the series compares), and each
    window's figure (an instant query over the whole window) beside them as `<key>:window`,
    which the summary reads first. No data, NaN or Inf: the figure is missing."""
    if release.deployed_at is None:
        raise IngestError(
            "The release has no deploy time, so it has no metrics window: set deployed_at "
            "(POST /api/releases, or ingest --deployed-at).",
            422,
        )
    previous = previous_release(release)
    _check_room(release)
    try:
        metrics = prometheus.release_metrics(
            client,
            config or prometheus_config(release.service.slug),
            service=release.service.slug,
            version=release.version,
            deploy_time=release.deployed_at,
            previous_version=previous.version if previous else None,
            previous_deploy_time=previous.deployed_at if previous else None,
            now=now,
        )
    except (prometheus.PrometheusError, prometheus.QueryTemplateError) as exc:
        raise IngestError(f"Prometheus: {exc}", 502) from None
    results = []
    for window, measured in (
        (MetricWindow.RELEASE, metrics.release),
        (MetricWindow.BASELINE, metrics.baseline),
    ):
        end = min(measured.window.end, now or timezone.now())
        figures = [
            MetricSampleRecord(f"{key}:window", (), end, value)
            for key, value in (
                ("error_rate", measured.summary.error_rate),
                ("response_time_p95", measured.summary.response_time_p95),
            )
        ]
        results.append(
            ingest_metrics(
                release,
                [*figures, *measured.samples],
                origin,
                window=window,
                file_names=[client.where],
                allow_empty=True,
            )
        )
    return results


def prometheus_config(service: str) -> prometheus.MetricsConfig:
    """The service's PromQL from the policy's `metric_names` (its own, else "*"'s), over the
    defaults."""
    own = verdicts.settings_of(verdicts.current_policy()).metric_names_for(service).prometheus
    try:
        return prometheus.MetricsConfig(
            default=prometheus.queries_from_mapping(own.model_dump(exclude_none=True))
        )
    except prometheus.QueryTemplateError as exc:
        raise IngestError(f"The PromQL of {service} in the policy: {exc}", 422) from None


def _check_room(release: Release) -> None:
    """A deploy time so near the calendar's ends that its window or its baseline (a week
    earlier) falls outside it (year 1, year 9999) is refused, not a 500."""
    assert release.deployed_at is not None
    try:
        window = release_window(release.deployed_at)
        baseline_window(window)
    except OverflowError:
        raise IngestError(
            f"The deploy time {release.deployed_at.isoformat()} leaves no room for the "
            "release's metrics window and its baseline a week earlier: give the real deploy "
            "time.",
            422,
        ) from None


NO_DEPLOY_TIME = (
    "The release has no deploy time, so its metrics have no window: all {count} samples were "
    "taken as the release's own, with no baseline, and its error rate and p95 are the whole "
    "file's, not judged against a baseline. Give the deploy time (--deployed-at, deployed_at) "
    "to have them split into the release's window and its baseline."
)
NO_BASELINE = (
    "No sample lies in the baseline window ({start:%Y-%m-%d %H:%M} to {end:%H:%M} UTC), so "
    "the error rate and p95 are not judged against a baseline."
)


@refreshed_once
def ingest_metrics_file(
    release: Release,
    samples: Iterable[MetricSampleRecord],
    origin: Origin,
    *,
    window: str | None = None,
    file_names: Sequence[str] = (),
) -> list[Ingested]:
    """A metrics file's samples. With a `window`, all of them measure it. Without one, a release
    with a deploy time has them split as Prometheus' are (`file_release_metrics`): each sample
    counts in the window its timestamp lies in (an undated one in the release's), the rest is
    left out; a release without a deploy time takes them all as its own window's."""
    samples = list(samples)
    if window is not None or release.deployed_at is None:
        chosen = window or MetricWindow.RELEASE
        note = NO_DEPLOY_TIME.format(count=len(samples)) if window is None else ""
        return [
            ingest_metrics(
                release, samples, origin, window=chosen, file_names=file_names, note=note
            )
        ]
    if not samples:
        raise IngestError("No metric samples in what was sent.", 422)
    previous = previous_release(release)
    _check_room(release)
    try:
        split = file_release_metrics(
            samples,
            names=summary.names_for(release.service.slug),
            deploy_time=release.deployed_at,
            previous_deploy_time=previous.deployed_at if previous else None,
        )
    except MetricValueError as exc:
        raise IngestError(f"Refused: {exc}.", 422) from None
    if not split.release.samples and not split.baseline.samples:
        raise IngestError(
            f"None of the {len(samples)} samples lies in the release's window or its baseline's "
            f"(from {release.deployed_at:%Y-%m-%d %H:%M} UTC); pass the window to take them all.",
            422,
        )
    note = (
        ""
        if split.baseline.samples
        else NO_BASELINE.format(start=split.baseline.window.start, end=split.baseline.window.end)
    )
    with transaction.atomic():
        return [
            ingest_metrics(
                release,
                list(part.samples),
                origin,
                window=name,
                file_names=file_names,
                note=note if name == MetricWindow.RELEASE else "",
            )
            for name, part in (
                (MetricWindow.RELEASE, split.release),
                (MetricWindow.BASELINE, split.baseline),
            )
            if part.samples
        ]
