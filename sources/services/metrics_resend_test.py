"""Issue 37, item 6: metrics sent again for the same release and window replace the earlier
reading; the same content twice is one reading; another metric's file is kept beside it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from releases.models import Release
from sources import services
from sources.models import MetricSample
from sources.parsers.openmetrics import parse_metrics
from sources.services import Origin

pytestmark = pytest.mark.django_db

DEPLOYED = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def metrics_file(name: str, minutes: range, value: float) -> bytes:
    """One sample a minute, from the deploy time on (and before it for negative minutes)."""
    lines = [
        f"{name} {value} {int((DEPLOYED + timedelta(minutes=m)).timestamp() * 1000)}"
        for m in minutes
    ]
    return ("\n".join(lines) + "\n").encode()


def send(release: Release, data: bytes, name: str = "metrics.txt") -> None:
    services.ingest_metrics_file(
        release, parse_metrics(data, source=name), Origin("command"), file_names=[name]
    )


def deployed(make_release: Callable[..., Release]) -> Release:
    release = make_release("v1.0.0")
    release.deployed_at = DEPLOYED
    release.save()
    return release


def test_a_window_sent_again_is_one_reading(make_release: Callable[..., Release]) -> None:
    release = deployed(make_release)
    first = metrics_file("detective_error_rate", range(20), 0.2)
    send(release, first)
    assert MetricSample.objects.filter(release=release, window="release").count() == 20
    # Sent again with other figures (the job re-run, the file regenerated): replaced.
    send(release, metrics_file("detective_error_rate", range(20), 0.01))
    samples = MetricSample.objects.filter(release=release, window="release")
    assert samples.count() == 20  # not 40
    assert set(samples.values_list("value", flat=True)) == {0.01}
    send(release, metrics_file("detective_error_rate", range(20), 0.01))  # the same again
    assert MetricSample.objects.filter(release=release).count() == 20


def test_a_corrected_file_replaces_the_metric_and_keeps_the_others(
    make_release: Callable[..., Release],
) -> None:
    release = deployed(make_release)
    send(release, metrics_file("detective_error_rate", range(10), 0.2), "errors.txt")
    send(release, metrics_file("detective_response_time_p95_ms", range(10), 300), "p95.txt")
    send(release, metrics_file("detective_error_rate", range(10), 0.01), "errors.txt")
    samples = MetricSample.objects.filter(release=release)
    assert samples.filter(name="detective_error_rate").count() == 10
    assert set(samples.filter(name="detective_error_rate").values_list("value", flat=True)) == {
        0.01
    }
    assert samples.filter(name="detective_response_time_p95_ms").count() == 10
    release.refresh_from_db()
    assert release.deployment_metrics["error_rate"] == pytest.approx(0.01)
