"""The client's wire details against respx (tests/prometheus_test.py runs a real Prometheus)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import respx

from sources.parsers.openmetrics import MetricSampleRecord, MetricSummary
from sources.parsers.prometheus import (
    MetricQueries,
    MetricsConfig,
    PrometheusClient,
    PrometheusHTTPError,
    PrometheusQueryError,
    PrometheusResponseError,
    PrometheusTimeout,
    PrometheusUnreachable,
    QueryTemplateError,
    ReleaseMetrics,
    Window,
    WindowMetrics,
    baseline_window,
    config_from_mapping,
    parse_duration,
    promql_duration,
    release_metrics,
    release_window,
    render,
    window_metrics,
)

BASE = "http://prometheus.test:9090"
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(days=1)


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


@pytest.fixture(scope="module")
def client() -> Iterator[PrometheusClient]:
    # One for the module: making an httpx client (its TLS context) takes a fifth of a second.
    with PrometheusClient(BASE, timeout=1.0) as client:
        yield client


def vector(*series: tuple[dict[str, str], str]) -> dict[str, Any]:
    result = [{"metric": labels, "value": [T0.timestamp(), value]} for labels, value in series]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def matrix(labels: dict[str, str], *values: str) -> dict[str, Any]:
    points = [[T0.timestamp() + 60 * i, value] for i, value in enumerate(values)]
    result = [{"metric": labels, "values": points}]
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


# --- templates and windows -------------------------------------------------------------------


def test_render_fills_placeholders_escapes_strings_and_leaves_promql_braces() -> None:
    rendered = render(
        'sum(rate(x{service="{service}",version="{version}"}[{window}]))',
        service='pay"ments',
        version="1.2\\3",
        window=timedelta(minutes=30),
    )
    assert rendered == 'sum(rate(x{service="pay\\"ments",version="1.2\\\\3"}[30m]))'


@pytest.mark.parametrize(
    ("length", "duration"),
    [
        (timedelta(hours=2), "2h"),
        (timedelta(minutes=90), "90m"),
        (timedelta(seconds=45), "45s"),
        (timedelta(days=1), "1d"),
    ],
)
def test_windows_are_promql_durations(length: timedelta, duration: str) -> None:
    assert promql_duration(length) == duration


def test_a_window_under_a_second_or_fractional_is_refused() -> None:
    with pytest.raises(QueryTemplateError):
        promql_duration(timedelta(milliseconds=1500))
    with pytest.raises(QueryTemplateError):
        promql_duration(timedelta(0))


def test_a_template_with_an_unknown_placeholder_is_refused_when_configured() -> None:
    with pytest.raises(QueryTemplateError, match=r"\{servce\}.*\{service\}, \{version\}"):
        MetricQueries(error_rate='sum(rate(x{service="{servce}"}[{window}]))')


def test_per_service_queries_and_the_default() -> None:
    special = MetricQueries(response_time_p95="max(p95_ms)", response_time_p95_factor=1.0)
    config = MetricsConfig(services={"search": special})
    assert config.for_service("search") is special
    assert config.for_service("checkout") == MetricQueries()


def test_config_from_plain_settings_with_service_overrides() -> None:
    config = config_from_mapping(
        {
            "default": {"rate_interval": "2m", "step": 30},
            "services": {
                "search": {"response_time_p95": "max(p95_ms)", "response_time_p95_factor": 1}
            },
        }
    )
    assert config.default == MetricQueries(
        rate_interval=timedelta(minutes=2), step=timedelta(seconds=30)
    )
    search = config.for_service("search")
    assert (search.response_time_p95, search.response_time_p95_factor) == ("max(p95_ms)", 1.0)
    # The service's settings fill in over the default's.
    assert search.rate_interval == timedelta(minutes=2)
    assert search.error_rate == MetricQueries().error_rate


@pytest.mark.parametrize(
    "settings",
    [
        {"default": {"p95": "x"}},
        {"services": {"s": {"step": "five minutes"}}},
        {"service": {}},
        {"default": {"error_rate": "rate(x[{windw}])"}},
    ],
)
def test_bad_settings_are_refused_by_name(settings: dict[str, Any]) -> None:
    with pytest.raises(QueryTemplateError):
        config_from_mapping(settings)


def test_durations_in_settings() -> None:
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("1h") == timedelta(hours=1)
    assert parse_duration(300) == timedelta(minutes=5)


def test_release_window_and_baselines() -> None:
    own = release_window(T0, timedelta(minutes=30))
    assert own == Window(T0, T0 + timedelta(minutes=30))
    # The previous release's window, as long as this one.
    previous = T0 - timedelta(hours=3)
    assert baseline_window(own, previous) == Window(previous, previous + timedelta(minutes=30))
    # Deployed ten minutes before: its window stops where this one starts.
    close = T0 - timedelta(minutes=10)
    assert baseline_window(own, close) == Window(close, T0)
    # No previous release (or one not before this): a week earlier.
    week = timedelta(weeks=1)
    assert baseline_window(own) == Window(T0 - week, T0 + timedelta(minutes=30) - week)
    assert baseline_window(own, T0 + timedelta(minutes=5)) == baseline_window(own)


# --- the wire --------------------------------------------------------------------------------


def test_instant_query_sends_query_and_time_and_reads_string_values(
    router: respx.MockRouter, client: PrometheusClient
) -> None:
    route = router.get("/api/v1/query").respond(
        json=vector(({"__name__": "up", "job": "a"}, "1"), ({"job": "b"}, "0.25"))
    )
    samples = client.query("up", T0)
    assert route.calls.last.request.url.params["query"] == "up"
    assert route.calls.last.request.url.params["time"] == f"{T0.timestamp():.3f}"
    assert samples == [
        MetricSampleRecord("up", (("job", "a"),), T0, 1.0),
        MetricSampleRecord("", (("job", "b"),), T0, 0.25),
    ]


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_nan_and_infinities_are_missing(
    router: respx.MockRouter, client: PrometheusClient, value: str
) -> None:
    router.get("/api/v1/query").respond(json=vector(({}, value)))
    assert client.query("x", T0, name="error_rate")[0].value is None


def test_a_scalar_answer_is_one_sample(router: respx.MockRouter, client: PrometheusClient) -> None:
    body = {"status": "success", "data": {"resultType": "scalar", "result": [1.5e9, "0.5"]}}
    router.get("/api/v1/query").respond(json=body)
    [only] = client.query("scalar(x)", T0, name="error_rate")
    assert (only.name, only.value) == ("error_rate", 0.5)


def test_range_query_sends_start_end_step(
    router: respx.MockRouter, client: PrometheusClient
) -> None:
    route = router.get("/api/v1/query_range").respond(json=matrix({"pod": "p"}, "1", "NaN", "3"))
    samples = client.query_range("x", T0, T0 + timedelta(minutes=2), timedelta(minutes=1))
    params = route.calls.last.request.url.params
    assert (params["start"], params["step"]) == (f"{T0.timestamp():.3f}", "60")
    assert [s.value for s in samples] == [1.0, None, 3.0]
    assert samples[2].timestamp == T0 + timedelta(minutes=2)


@pytest.mark.parametrize(
    ("status", "error_type"), [(400, "bad_data"), (422, "execution"), (503, "timeout")]
)
def test_status_error_is_a_query_error_with_prometheus_reason(
    router: respx.MockRouter, client: PrometheusClient, status: int, error_type: str
) -> None:
    body = {"status": "error", "errorType": error_type, "error": "parse error at char 7"}
    router.get("/api/v1/query").respond(status, json=body)
    with pytest.raises(PrometheusQueryError, match="parse error at char 7") as refused:
        client.query("sum(", T0)
    assert (refused.value.status_code, refused.value.error_type) == (status, error_type)


def test_a_non_200_without_prometheus_body_is_an_http_error(
    router: respx.MockRouter, client: PrometheusClient
) -> None:
    router.get("/api/v1/query").respond(502, text="<html>Bad gateway</html>")
    with pytest.raises(PrometheusHTTPError, match="HTTP 502 Bad Gateway") as failed:
        client.query("up", T0)
    assert failed.value.status_code == 502


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        '{"status": "success"}',
        '{"status": "success", "data": {"resultType": "string", "result": [1, "x"]}}',
        '{"status": "success", "data": {"resultType": "vector", '
        '"result": [{"metric": {}, "value": [1, "twelve"]}]}}',
        '{"status": "success", "data": {"resultType": "vector", '
        '"result": [{"metric": {}, "value": [1, 12]}]}}',
    ],
)
def test_an_answer_not_in_the_api_shape_is_a_response_error(
    router: respx.MockRouter, client: PrometheusClient, body: str
) -> None:
    router.get("/api/v1/query").respond(200, text=body)
    with pytest.raises(PrometheusResponseError):
        client.query("up", T0)


def test_transport_errors_are_translated(
    router: respx.MockRouter, client: PrometheusClient
) -> None:
    router.get("/api/v1/query").mock(side_effect=httpx.ReadTimeout("read timed out"))
    with pytest.raises(PrometheusTimeout, match="did not answer in time"):
        client.query("up", T0)
    router.get("/api/v1/query").mock(side_effect=httpx.ConnectError("connection refused"))
    with pytest.raises(PrometheusUnreachable, match="connection refused"):
        client.query("up", T0)


def test_credentials_in_the_url_stay_out_of_messages(router: respx.MockRouter) -> None:
    router.get("/api/v1/query").respond(500, text="boom")
    with (
        PrometheusClient("http://reader:s3cret@prometheus.test:9090") as secret,
        pytest.raises(PrometheusHTTPError) as failed,
    ):
        secret.query("up", T0)
    assert "s3cret" not in str(failed.value)
    assert "reader" not in str(failed.value)
    assert "http://prometheus.test:9090" in str(failed.value)


# --- windows over the wire -------------------------------------------------------------------


def answer_by_key(request: httpx.Request) -> httpx.Response:
    """error_rate queries answer 0.02, p95 ones 0.4 (seconds); range queries two points."""
    query = request.url.params["query"]
    value = "0.02" if "code=~" in query else "0.4"
    if request.url.path.endswith("query_range"):
        return httpx.Response(200, json=matrix({}, value, value))
    return httpx.Response(200, json=vector(({}, value)))


def test_window_metrics_renders_each_query_and_scales_p95_to_ms(
    router: respx.MockRouter, client: PrometheusClient
) -> None:
    route = router.route(path__startswith="/api/v1/query").mock(side_effect=answer_by_key)
    metrics = window_metrics(
        client,
        MetricQueries(),
        Window(T0, T0 + timedelta(minutes=30)),
        service="checkout",
        version="2.0",
        now=LATER,
    )
    assert metrics.summary == MetricSummary(error_rate=0.02, response_time_p95=400.0)
    assert [(s.name, s.value) for s in metrics.samples] == [
        ("error_rate", 0.02),
        ("error_rate", 0.02),
        ("response_time_p95", 400.0),
        ("response_time_p95", 400.0),
    ]
    queries = [call.request.url.params["query"] for call in route.calls]
    # Instant queries over the window's length, range queries over the rate interval.
    assert '{service="checkout",code=~"5.."}[30m]' in queries[0]
    assert '{service="checkout",code=~"5.."}[5m]' in queries[1]
    assert "[30m]" in queries[2]
    assert queries[2].startswith("histogram_quantile(0.95, ")
    assert (
        route.calls[0].request.url.params["time"]
        == f"{(T0 + timedelta(minutes=30)).timestamp():.3f}"
    )


def test_a_window_still_open_stops_at_now_and_one_not_begun_asks_nothing(
    router: respx.MockRouter, client: PrometheusClient
) -> None:
    route = router.route(path__startswith="/api/v1/query").mock(side_effect=answer_by_key)
    now = T0 + timedelta(minutes=10)
    window_metrics(
        client,
        MetricQueries(),
        Window(T0, T0 + timedelta(minutes=30)),
        service="s",
        version="1",
        now=now,
    )
    assert "[10m]" in route.calls[0].request.url.params["query"]
    assert route.calls[0].request.url.params["time"] == f"{now.timestamp():.3f}"
    assert route.calls[1].request.url.params["end"] == f"{now.timestamp():.3f}"
    calls = route.call_count
    future = window_metrics(
        client,
        MetricQueries(),
        Window(now + timedelta(hours=1), now + timedelta(hours=2)),
        service="s",
        version="1",
        now=now,
    )
    assert future.summary.as_dict() == {} and future.samples == ()
    assert route.call_count == calls


def test_a_now_with_microseconds_gives_a_whole_second_window(
    router: respx.MockRouter, client: PrometheusClient
) -> None:
    route = router.route(path__startswith="/api/v1/query").mock(side_effect=answer_by_key)
    now = T0 + timedelta(minutes=10, seconds=3, microseconds=250_000)
    window_metrics(
        client,
        MetricQueries(),
        Window(T0, T0 + timedelta(minutes=30)),
        service="s",
        version="1",
        now=now,
    )
    assert "[603s]" in route.calls[0].request.url.params["query"]
    assert route.calls[0].request.url.params["time"] == f"{(T0.timestamp() + 603):.3f}"


def test_several_series_for_one_figure_is_an_error(
    router: respx.MockRouter, client: PrometheusClient
) -> None:
    router.get("/api/v1/query").respond(json=vector(({"pod": "a"}, "0.1"), ({"pod": "b"}, "0.2")))
    with pytest.raises(PrometheusResponseError, match="answered 2 series"):
        window_metrics(
            client,
            MetricQueries(),
            Window(T0, T0 + timedelta(minutes=5)),
            service="s",
            version="1",
            now=LATER,
        )


def test_an_error_rate_that_is_a_percentage_is_refused(
    router: respx.MockRouter, client: PrometheusClient
) -> None:
    router.get("/api/v1/query").respond(json=vector(({}, "12.5")))
    router.get("/api/v1/query_range").respond(json=matrix({}, "12.5"))
    with pytest.raises(
        PrometheusResponseError, match=r"answered 12\.5: an error rate is a fraction"
    ):
        window_metrics(
            client,
            MetricQueries(),
            Window(T0, T0 + timedelta(minutes=5)),
            service="s",
            version="1",
            now=LATER,
        )


def test_release_metrics_uses_the_previous_version_in_the_baseline(
    router: respx.MockRouter, client: PrometheusClient
) -> None:
    route = router.route(path__startswith="/api/v1/query").mock(side_effect=answer_by_key)
    queries = MetricQueries(
        error_rate='sum(rate(x{version="{version}",code=~"5.."}[{window}]))',
        response_time_p95='max(p95{version="{version}"})',
    )
    metrics = release_metrics(
        client,
        MetricsConfig(default=queries),
        service="s",
        version="2.0",
        deploy_time=T0,
        previous_version="1.9",
        previous_deploy_time=T0 - timedelta(hours=1),
        now=LATER,
    )
    versions = ['version="2.0"'] * 4 + ['version="1.9"'] * 4
    sent = [call.request.url.params["query"] for call in route.calls]
    assert all(v in q for v, q in zip(versions, sent, strict=True))
    assert metrics.deployment_metrics() == {
        "error_rate": 0.02,
        "response_time_p95": 400.0,
        "error_rate_baseline": 0.02,
        "response_time_p95_baseline": 400.0,
    }


def test_deployment_metrics_leaves_missing_figures_out() -> None:
    empty = WindowMetrics(Window(T0, T0), (), MetricSummary())
    own = WindowMetrics(Window(T0, T0), (), MetricSummary(error_rate=0.1))
    assert ReleaseMetrics(own, empty).deployment_metrics() == {"error_rate": 0.1}
