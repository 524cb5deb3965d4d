"""The metrics client against a real Prometheus (Debian's package), loaded with series through
`promtool tsdb create-blocks-from openmetrics` and queried over HTTP; plus a server that never
answers and one that refuses the query.

The series: service `checkout` serves 100 good requests a minute from three hours before the
deploy to 40 minutes after it; 5xx answers grow 1 a minute before the deploy and 4 after it; its
latency histogram shifts from mostly fast to slower at the deploy. Service `nan-svc` exposes
gauges whose values are NaN and +Inf.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from sources.parsers.openmetrics import MetricSampleRecord, parse_metrics, summarize
from sources.parsers.prometheus import (
    MetricQueries,
    MetricsConfig,
    PrometheusClient,
    PrometheusQueryError,
    PrometheusTimeout,
    PrometheusUnreachable,
    Window,
    release_metrics,
    window_metrics,
)
from tests.prometheus_server import free_port, silent_server

# A Prometheus server and the metrics client, no database or Redis: the same in both of CI's
# passes.
pytestmark = pytest.mark.backend_independent

# Two days back, on the hour: well inside the server's retention, clear of "now".
DEPLOY = (datetime.now(tz=UTC) - timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
PREVIOUS_DEPLOY = DEPLOY - timedelta(hours=2)
WINDOW = timedelta(minutes=30)
BOUNDS = ("0.1", "0.25", "0.5", "1", "+Inf")
# Per minute, how many requests fall in each bucket (not cumulative), before and after.
BEFORE = (60, 30, 8, 2, 0)
AFTER = (40, 30, 20, 8, 2)
NAN_QUERIES = MetricQueries(
    error_rate='max(detective_error_rate{service="{service}"})',
    response_time_p95='max(detective_response_time_p95_ms{service="{service}"})',
    response_time_p95_factor=1.0,
)


def _minutes() -> list[datetime]:
    start = DEPLOY - timedelta(hours=3)
    return [start + timedelta(minutes=m) for m in range(3 * 60 + 41)]


def series_text() -> str:
    """The series as OpenMetrics (each series' points together, as the format requires)."""
    moments = _minutes()
    lines = ["# TYPE http_requests counter"]
    for code, before, after, start in (("200", 100, 100, 10_000), ("500", 1, 4, 500)):
        count = start
        for moment in moments:
            lines.append(
                f'http_requests_total{{service="checkout",code="{code}"}} {count} '
                f"{int(moment.timestamp())}"
            )
            count += after if moment >= DEPLOY else before
    lines.append("# TYPE http_request_duration_seconds histogram")
    cumulative = [1000 * sum(BEFORE[: i + 1]) for i in range(len(BOUNDS))]
    total_seconds = 5000.0
    for moment in moments:
        stamp = int(moment.timestamp())
        for bound, count in zip(BOUNDS, cumulative, strict=True):
            lines.append(
                f'http_request_duration_seconds_bucket{{service="checkout",le="{bound}"}} '
                f"{count} {stamp}"
            )
        lines.append(
            f'http_request_duration_seconds_count{{service="checkout"}} {cumulative[-1]} {stamp}'
        )
        lines.append(
            f'http_request_duration_seconds_sum{{service="checkout"}} {total_seconds} {stamp}'
        )
        per_bucket = AFTER if moment >= DEPLOY else BEFORE
        cumulative = [c + sum(per_bucket[: i + 1]) for i, c in enumerate(cumulative)]
        total_seconds += 30.0
    lines.append("# TYPE detective_error_rate gauge")
    lines += [
        f'detective_error_rate{{service="nan-svc"}} NaN {int(m.timestamp())}' for m in moments
    ]
    lines.append("# TYPE detective_response_time_p95_ms gauge")
    lines += [
        f'detective_response_time_p95_ms{{service="nan-svc"}} +Inf {int(m.timestamp())}'
        for m in moments
    ]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


SERIES = series_text()


@pytest.fixture(scope="module")
def prometheus_url(start_prometheus: Callable[[str], str]) -> str:
    return start_prometheus(SERIES)


@pytest.fixture
def client(prometheus_url: str) -> PrometheusClient:
    return PrometheusClient(prometheus_url, timeout=10.0)


def test_error_rate_and_p95_of_the_release_and_its_previous_release(
    client: PrometheusClient,
) -> None:
    metrics = release_metrics(
        client,
        MetricsConfig(),
        service="checkout",
        version="2.0.0",
        deploy_time=DEPLOY,
        previous_version="1.9.0",
        previous_deploy_time=PREVIOUS_DEPLOY,
        length=WINDOW,
    )
    # 4 errors in 104 requests a minute after the deploy, 1 in 101 before.
    assert metrics.release.summary.error_rate == pytest.approx(4 / 104, rel=1e-9)
    assert metrics.baseline.summary.error_rate == pytest.approx(1 / 101, rel=1e-9)
    # Rank 95 of 100: after, 5 of the 8 in (0.5, 1] s; before, 5 of the 8 in (0.25, 0.5] s.
    assert metrics.release.summary.response_time_p95 == pytest.approx(812.5, rel=1e-9)
    assert metrics.baseline.summary.response_time_p95 == pytest.approx(406.25, rel=1e-9)
    assert metrics.baseline.window == Window(PREVIOUS_DEPLOY, PREVIOUS_DEPLOY + WINDOW)
    assert metrics.deployment_metrics() == pytest.approx(
        {
            "error_rate": 4 / 104,
            "response_time_p95": 812.5,
            "error_rate_baseline": 1 / 101,
            "response_time_p95_baseline": 406.25,
        }
    )


def test_range_samples_cover_the_window_step_by_step(client: PrometheusClient) -> None:
    metrics = window_metrics(
        client, MetricQueries(), Window(DEPLOY, DEPLOY + WINDOW), service="checkout", version="2"
    )
    by_key: dict[str, list[MetricSampleRecord]] = {}
    for sample in metrics.samples:
        by_key.setdefault(sample.name, []).append(sample)
    assert sorted(by_key) == ["error_rate", "response_time_p95"]
    for samples in by_key.values():
        # One a minute, both ends included.
        assert len(samples) == 31
        assert samples[0].timestamp == DEPLOY
        assert samples[-1].timestamp == DEPLOY + WINDOW
    # The rate over the last 5 minutes: before the deploy at its first step, after at its last.
    assert by_key["error_rate"][0].value == pytest.approx(1 / 101)
    assert by_key["error_rate"][-1].value == pytest.approx(4 / 104)
    assert by_key["response_time_p95"][-1].value == pytest.approx(812.5)


def test_the_file_path_and_prometheus_agree_on_the_same_series(client: PrometheusClient) -> None:
    """The OpenMetrics file's summary (increase + histogram_quantile interpolation done here)
    gives what Prometheus's own rate() and histogram_quantile() give over the window."""
    from_prometheus = window_metrics(
        client, MetricQueries(), Window(DEPLOY, DEPLOY + WINDOW), service="checkout", version="2"
    ).summary
    samples = [
        s for s in parse_metrics(SERIES, source="series.om") if ("service", "checkout") in s.labels
    ]
    from_file = summarize(samples, start=DEPLOY, end=DEPLOY + WINDOW)
    assert from_file.error_rate == pytest.approx(from_prometheus.error_rate, rel=1e-9)
    assert from_file.response_time_p95 == pytest.approx(from_prometheus.response_time_p95, rel=1e-9)
    assert from_file.origin == {
        "error_rate": "http_requests_total",
        "response_time_p95": "http_request_duration_seconds_bucket",
    }


def test_a_window_without_data_is_missing_not_zero(client: PrometheusClient) -> None:
    # No previous release: the baseline is the same window a week earlier, before any series.
    metrics = release_metrics(
        client, MetricsConfig(), service="checkout", version="2", deploy_time=DEPLOY, length=WINDOW
    )
    assert metrics.baseline.window.start == DEPLOY - timedelta(weeks=1)
    assert metrics.baseline.summary.error_rate is None
    assert metrics.baseline.summary.response_time_p95 is None
    assert metrics.baseline.samples == ()
    assert "error_rate_baseline" not in metrics.deployment_metrics()
    # A service Prometheus has never seen is missing too.
    unknown = window_metrics(
        client, MetricQueries(), Window(DEPLOY, DEPLOY + WINDOW), service="nobody", version="1"
    )
    assert unknown.summary.as_dict() == {}


def test_nan_and_inf_answers_are_missing_not_zero(client: PrometheusClient) -> None:
    config = MetricsConfig(services={"nan-svc": NAN_QUERIES})
    metrics = release_metrics(
        client, config, service="nan-svc", version="1", deploy_time=DEPLOY, length=WINDOW
    )
    assert metrics.release.summary.error_rate is None
    assert metrics.release.summary.response_time_p95 is None
    # The range answers carry the points, each one missing.
    assert len(metrics.release.samples) == 62
    assert all(sample.value is None for sample in metrics.release.samples)


def test_a_query_prometheus_refuses_is_a_clear_error(client: PrometheusClient) -> None:
    broken = MetricQueries(
        error_rate='sum(rate(http_requests_total{service="{service}"}[{window}])'
    )
    with pytest.raises(PrometheusQueryError) as refused:
        window_metrics(
            client, broken, Window(DEPLOY, DEPLOY + WINDOW), service="checkout", version="2"
        )
    assert refused.value.error_type == "bad_data"
    assert refused.value.status_code == 400
    assert "refused the query (bad_data, HTTP 400)" in str(refused.value)


def test_a_prometheus_that_never_answers_times_out() -> None:
    with (
        silent_server() as url,
        PrometheusClient(url, timeout=0.5) as silent,
        pytest.raises(PrometheusTimeout, match="did not answer in time"),
    ):
        silent.query("up", DEPLOY)


def test_a_prometheus_that_is_not_there_is_unreachable() -> None:
    with (
        PrometheusClient(f"http://127.0.0.1:{free_port()}", timeout=2.0) as absent,
        pytest.raises(PrometheusUnreachable, match="cannot be reached") as raised,
    ):
        absent.query("up", DEPLOY)
    assert not isinstance(raised.value, PrometheusTimeout)
