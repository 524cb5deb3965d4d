"""One metric of a release against its baseline window and the service's earlier releases (the
policy's `history_releases`), judged by the policy's metric judge (`risk.judge` with
`PolicySettings.judge_settings()`) in words, for
`GET /api/releases/<version>/metrics/<metric>/history`.

A metric is asked for by the summary's key (`error_rate`, `response_time_p95`): its series is
the one the policy's judge compares (`sources.summary.window_series`: Prometheus' per-step
samples, an exporter's gauges scaled to the key's unit, request counters as the error rate of
each scrape interval, latency histograms as each interval's p95). Any other stored name is
read as it is. A window's single figure (`<key>:window`) is one number, not a series: it is
left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from releases import verdicts
from releases.models import Release
from releases.release_order import earlier_releases
from risk.judge import JudgeSettings, Window, judge_metric
from risk.settings import PolicySettings
from sources.models import MetricSample, MetricWindow
from sources.summary import SUMMARY_METRICS, names_for, sources_of, window_series

METRIC_PATTERN = r"[A-Za-z_][A-Za-z0-9_:.]{0,199}"
MAX_NAMES_LISTED = 20


class UnknownMetric(LookupError):
    """Neither a summary metric nor a name the release has samples of; says which it has."""


HISTORY_SAMPLES_PER_RELEASE = 5_000


def samples(release: Release, metric: str, window: str) -> tuple[list[float], int, str | None]:
    """The window's values of `metric` (in the key's unit), how many were missing (NaN, Inf
    stored as empty), and the stored name they came from."""
    if metric in SUMMARY_METRICS:
        names = names_for(release.service.slug)
        series = window_series([release.pk], window, names)[release.pk].get(metric, [])
        return series[:HISTORY_SAMPLES_PER_RELEASE], 0, metric if series else None
    for scaled in sources_of(metric):
        values = list(
            MetricSample.objects.filter(release=release, window=window, name=scaled.name)
            .order_by("timestamp", "pk")
            .values_list("value", flat=True)[:HISTORY_SAMPLES_PER_RELEASE]
        )
        if values:
            kept = [v * scaled.factor for v in values if v is not None]
            return kept, len(values) - len(kept), scaled.name
    return [], 0, None


def policy_settings() -> PolicySettings:
    return verdicts.settings_of(verdicts.current_policy())


def check_known(release: Release, metric: str) -> None:
    """A summary metric is always known (no samples: too little data); any other name must be
    one the release has samples of, or UnknownMetric lists those it has."""
    if metric in SUMMARY_METRICS:
        return
    stored = MetricSample.objects.filter(release=release)
    if stored.filter(name=metric).exists():
        return
    names = list(
        stored.exclude(name__endswith=":window")
        .order_by("name")
        .values_list("name", flat=True)
        .distinct()[:MAX_NAMES_LISTED]
    )
    listed = ", ".join([*SUMMARY_METRICS, *(n for n in names if n not in SUMMARY_METRICS)])
    raise UnknownMetric(f"Release {release.version} has no metric {metric!r}; it has: {listed}.")


def metric_history(release: Release, metric: str) -> dict[str, Any]:
    check_known(release, metric)
    cfg = policy_settings()
    # The policy's judge, over the policy's window of earlier releases.
    settings = cfg.judge_settings()
    current, current_missing, origin = samples(release, metric, MetricWindow.RELEASE)
    baseline, baseline_missing, _ = samples(release, metric, MetricWindow.BASELINE)
    against_baseline = judge_metric(metric, baseline, current, settings)
    earlier: list[dict[str, Any]] = []
    pooled: list[float] = []
    for previous in earlier_releases(release)[: cfg.history_releases]:
        values, missing, _ = samples(previous, metric, MetricWindow.RELEASE)
        if values:
            pooled.extend(values)
        earlier.append(
            {
                "release_id": previous.version,
                "deployed_at": previous.deployed_at.isoformat() if previous.deployed_at else None,
                **_window(values, missing),
            }
        )
    against_history = judge_metric(metric, pooled, current, settings)
    return {
        "release_id": release.version,
        "metric": metric,
        "label": against_baseline.label,
        "unit": _unit(settings, metric),
        "stored_as": origin,
        "release_window": _window(current, current_missing),
        "baseline_window": _window(baseline, baseline_missing),
        "judgement_against_baseline": _judgement(against_baseline.as_dict()),
        "earlier_releases": earlier,
        "judgement_against_earlier_releases": {
            **_judgement(against_history.as_dict()),
            # The "baseline" of its sentence: these releases' windows, pooled.
            "pooled_from_releases": sum(1 for e in earlier if e["samples"]),
        },
        "min_samples": settings.min_samples,
        "confidence": settings.confidence,
    }


def _unit(settings: JudgeSettings, metric: str) -> str | None:
    described = settings.for_metric(metric)
    return "fraction (0.01 is 1 %)" if described.percent else (described.unit or None)


def _window(values: Sequence[float], missing: int) -> dict[str, Any]:
    summary = Window.of(numpy.asarray(values, dtype=float))
    return {
        "samples": summary.n,
        "missing": missing,
        "median": _rounded(summary.median),
        "q1": _rounded(summary.q1),
        "q3": _rounded(summary.q3),
        "mean": _rounded(summary.mean),
    }


def _judgement(data: dict[str, Any]) -> dict[str, Any]:
    """The judge's classification and sentence, with its test's figures."""
    return {
        "outcome": data["outcome"],
        "reason": data["reason"],
        "sentence": data["sentence"],
        "p_value": _rounded(data["p_value"]),
        "ratio": _rounded(data["ratio"]),
        "allowed_ratio": data["allowed_ratio"],
        "critical": data["critical"],
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.6g}")
