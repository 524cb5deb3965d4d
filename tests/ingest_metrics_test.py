"""`manage.py ingest` with metrics (issue 28, items 2 and 9): hostile values are command errors
that store nothing, and a window read without a deploy time or a baseline is said."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from releases.models import Release
from sources.models import Ingestion, MetricSample

pytestmark = pytest.mark.django_db

DEPLOY = 1795460400  # 2026-11-23T19:00:00Z


def ingest(*args: str) -> str:
    out = StringIO()
    call_command("ingest", *args, stdout=out)
    return out.getvalue()


def exporter_file(path: Path, *, start: int, errors_per_minute: int, minutes: int = 30) -> Path:
    """prometheus_client's shape: a request counter by `code`, scraped once a minute."""
    lines = ["# HELP http_requests_total Total requests.", "# TYPE http_requests_total counter"]
    for i in range(minutes + 1):
        at = (start + 60 * i) * 1000  # the text format stamps in milliseconds
        lines.append(f'http_requests_total{{code="200"}} {1000 * i} {at}')
        lines.append(f'http_requests_total{{code="500"}} {errors_per_minute * i} {at}')
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("timeout", ["-1", "nan", "0", "inf"])
def test_a_prometheus_timeout_that_is_no_time_is_a_command_error(timeout: str) -> None:
    with pytest.raises(CommandError, match="prometheus-timeout"):
        ingest("v1", "--prometheus", "http://127.0.0.1:9", "--prometheus-timeout", timeout)
    assert not Release.objects.exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# TYPE detective_error_rate gauge\ndetective_error_rate 1.5\n", "error rate is a"),
        (
            "# TYPE detective_response_time_p95_ms gauge\ndetective_response_time_p95_ms -3\n",
            "negative",
        ),
    ],
    ids=["error-rate-above-1", "negative-p95"],
)
def test_a_figure_its_key_cannot_hold_is_a_command_error(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "m.txt"
    path.write_text(text)
    with pytest.raises(CommandError, match=problem):
        ingest("v1", "--metrics-file", str(path))
    assert not MetricSample.objects.exists()
    assert not Release.objects.exists()


@pytest.mark.parametrize("deployed", ["0001-01-01T00:10:00+00:00", "9999-12-31T23:50:00+00:00"])
def test_a_deploy_time_at_the_calendars_ends_is_a_command_error(
    tmp_path: Path, deployed: str
) -> None:
    path = exporter_file(tmp_path / "m.txt", start=DEPLOY, errors_per_minute=3)
    with pytest.raises(CommandError, match="out of range: years 2 to 9998"):
        ingest("v1", "--deployed-at", deployed, "--metrics-file", str(path))
    assert not Ingestion.objects.exists()
    assert not Release.objects.exists()


def test_without_a_deploy_time_the_command_says_so(tmp_path: Path) -> None:
    path = exporter_file(tmp_path / "m.txt", start=DEPLOY, errors_per_minute=3)
    out = ingest("v1", "--metrics-file", str(path))
    assert "note: The release has no deploy time" in out
    assert "no baseline" in out


def test_without_a_baseline_the_command_says_so(tmp_path: Path) -> None:
    path = exporter_file(tmp_path / "m.txt", start=DEPLOY, errors_per_minute=3)
    out = ingest("v1", "--deployed-at", "2026-11-23T19:00:00+00:00", "--metrics-file", str(path))
    assert "note: No sample lies in the baseline window" in out
    release = Release.objects.get()
    # 3 errors in 1,003 requests a minute: the counters read as rates, not their totals.
    assert release.deployment_metrics["error_rate"] == pytest.approx(3 / 1003, rel=1e-3)
