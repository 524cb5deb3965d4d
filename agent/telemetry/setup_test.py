from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent.telemetry.file_exporter import read_trace
from agent.telemetry.setup import (
    CAPTURE_CONTENT_ENV,
    ENDPOINT_ENV,
    EXEMPLAR_FILTER_ENV,
    METRICS_ENDPOINT_ENV,
    METRICS_EXPORTER_ENV,
    TRACES_ENDPOINT_ENV,
    TRACES_EXPORTER_ENV,
    TelemetryConfig,
    active_telemetry,
    build_resource,
    capture_content_default,
    configure_telemetry,
    shutdown_telemetry,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (
        ENDPOINT_ENV,
        TRACES_ENDPOINT_ENV,
        METRICS_ENDPOINT_ENV,
        TRACES_EXPORTER_ENV,
        METRICS_EXPORTER_ENV,
        CAPTURE_CONTENT_ENV,
        EXEMPLAR_FILTER_ENV,
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ):
        monkeypatch.delenv(name, raising=False)
    shutdown_telemetry()
    yield
    shutdown_telemetry()


def test_config_defaults_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plain = TelemetryConfig(data_dir=tmp_path)
    assert plain.service_name == "detective"
    assert plain.otlp_endpoint is None
    assert plain.capture_content is False
    assert plain.file_export is True
    assert plain.traces_dir == tmp_path / "traces"

    monkeypatch.setenv(ENDPOINT_ENV, "http://collector:4318")
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    configured = TelemetryConfig(data_dir=tmp_path)
    assert configured.otlp_endpoint == "http://collector:4318"
    assert configured.capture_content is True


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", True), ("yes", True), ("ON", True), ("0", False), ("", False), ("nope", False)],
)
def test_capture_content_flag(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, expected: bool
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, value)
    assert TelemetryConfig(data_dir=tmp_path).capture_content is expected
    assert capture_content_default() is expected


def test_spans_reach_the_trace_file_and_extra_processors(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    telemetry = configure_telemetry(
        TelemetryConfig(data_dir=tmp_path, service_name="detective-test"),
        set_global=False,
        span_processors=[SimpleSpanProcessor(memory)],
        metric_readers=[reader],
    )

    with telemetry.tracer.start_as_current_span("invoke_agent detective") as span:
        pass
    telemetry.metrics.record_context(utilisation=0.5, strategy="none")
    telemetry.force_flush()

    trace_id = trace.format_trace_id(span.get_span_context().trace_id)
    [stored] = read_trace(tmp_path / "traces", trace_id)
    assert stored["name"] == "invoke_agent detective"
    assert stored["resource"]["service.name"] == "detective-test"
    assert [s.name for s in memory.get_finished_spans()] == ["invoke_agent detective"]
    assert reader.get_metrics_data() is not None
    assert telemetry.file_exporter is not None
    assert telemetry.capture_content is False


def test_configure_is_idempotent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = configure_telemetry(TelemetryConfig(data_dir=tmp_path), set_global=False)
    again = configure_telemetry(TelemetryConfig(data_dir=tmp_path), set_global=False)
    with caplog.at_level(logging.WARNING):
        other = configure_telemetry(
            TelemetryConfig(data_dir=tmp_path / "elsewhere"), set_global=False
        )
    assert first is again is other
    assert active_telemetry() is first
    assert "already configured" in caplog.text


def test_capture_content_default_follows_the_configuration(tmp_path: Path) -> None:
    configure_telemetry(TelemetryConfig(data_dir=tmp_path, capture_content=True), set_global=False)
    assert capture_content_default() is True


def test_file_export_can_be_turned_off(tmp_path: Path) -> None:
    telemetry = configure_telemetry(
        TelemetryConfig(data_dir=tmp_path, file_export=False), set_global=False
    )
    with telemetry.tracer.start_as_current_span("nowhere"):
        pass
    telemetry.force_flush()
    assert telemetry.file_exporter is None
    assert not (tmp_path / "traces").exists()


def test_otlp_exporters_get_the_signal_urls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.exporter.otlp.proto.http import metric_exporter, trace_exporter

    endpoints: list[str] = []

    def recording(cls: type) -> object:
        def build(*, endpoint: str) -> object:
            endpoints.append(endpoint)
            return cls(endpoint=endpoint)

        return build

    monkeypatch.setattr(
        trace_exporter, "OTLPSpanExporter", recording(trace_exporter.OTLPSpanExporter)
    )
    monkeypatch.setattr(
        metric_exporter, "OTLPMetricExporter", recording(metric_exporter.OTLPMetricExporter)
    )
    configure_telemetry(
        TelemetryConfig(data_dir=tmp_path, otlp_endpoint="http://collector:4318/"),
        set_global=False,
    )
    assert endpoints == ["http://collector:4318/v1/traces", "http://collector:4318/v1/metrics"]


def test_shutdown_allows_a_new_setup(tmp_path: Path) -> None:
    first = configure_telemetry(TelemetryConfig(data_dir=tmp_path), set_global=False)
    shutdown_telemetry()
    assert active_telemetry() is None
    second = configure_telemetry(TelemetryConfig(data_dir=tmp_path), set_global=False)
    assert second is not first


def test_global_setup_feeds_wrappers_built_without_a_tracer(tmp_path: Path) -> None:
    """Run in a fresh interpreter: global providers can be installed once per process."""
    script = textwrap.dedent(
        f"""
        import asyncio
        from pathlib import Path
        from opentelemetry import trace
        from agent.messages import ToolCall, ToolResult
        from agent.telemetry import TelemetryConfig, TracedToolExecutor, configure_telemetry
        from agent.telemetry.file_exporter import read_trace

        telemetry = configure_telemetry(TelemetryConfig(data_dir=Path({str(tmp_path)!r})))
        assert trace.get_tracer_provider() is telemetry.tracer_provider

        class Tools:
            def get_tools(self):
                return []
            def format_for_provider(self, provider):
                return []
            async def execute(self, call):
                return ToolResult(tool_call_id=call.id, name=call.name, content="", success=True)

        tools = TracedToolExecutor(Tools())
        with trace.get_tracer("script").start_as_current_span("root") as root:
            asyncio.run(tools.execute(ToolCall(id="c1", name="t")))
        telemetry.shutdown()
        trace_id = trace.format_trace_id(root.get_span_context().trace_id)
        names = [s["name"] for s in read_trace(Path({str(tmp_path)!r}) / "traces", trace_id)]
        print(",".join(names))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "root,execute_tool t"


def test_the_tracer_is_made_once(tmp_path: Path) -> None:
    telemetry = configure_telemetry(TelemetryConfig(data_dir=tmp_path), set_global=False)
    assert telemetry.tracer is telemetry.tracer


@pytest.mark.parametrize(
    ("env", "traces", "metrics"),
    [
        ({}, None, None),
        (
            {ENDPOINT_ENV: "http://c:4318/"},
            "http://c:4318/v1/traces",
            "http://c:4318/v1/metrics",
        ),
        (
            {ENDPOINT_ENV: "http://c:4318", METRICS_EXPORTER_ENV: "none"},
            "http://c:4318/v1/traces",
            None,
        ),
        (
            {ENDPOINT_ENV: "http://c:4318", TRACES_EXPORTER_ENV: "none"},
            None,
            "http://c:4318/v1/metrics",
        ),
        # A signal's own endpoint is a full URL, used as it is.
        (
            {ENDPOINT_ENV: "http://c:4318", TRACES_ENDPOINT_ENV: "http://t:9/otlp/spans"},
            "http://t:9/otlp/spans",
            "http://c:4318/v1/metrics",
        ),
        ({METRICS_ENDPOINT_ENV: "http://m:9/v1/metrics"}, None, "http://m:9/v1/metrics"),
        # Named without an endpoint: the SDK's default one.
        ({TRACES_EXPORTER_ENV: "otlp"}, "http://localhost:4318/v1/traces", None),
        (
            {TRACES_EXPORTER_ENV: "console,zipkin", ENDPOINT_ENV: "http://c:4318"},
            None,
            "http://c:4318/v1/metrics",
        ),
    ],
)
def test_the_standard_exporter_variables(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    env: dict[str, str],
    traces: str | None,
    metrics: str | None,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = TelemetryConfig(data_dir=tmp_path)
    assert config.otlp_traces_url == traces
    assert config.otlp_metrics_url == metrics


def test_unknown_exporters_are_named_in_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(TRACES_EXPORTER_ENV, "console,zipkin")
    with caplog.at_level(logging.WARNING):
        config = TelemetryConfig(data_dir=tmp_path)
    assert config.console_traces is True
    assert "zipkin" in caplog.text


def test_the_resource_follows_the_sdk_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    assert build_resource().attributes["service.name"] == "detective"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging,team=qa")
    resource = build_resource()
    assert resource.attributes["service.name"] == "detective"
    assert resource.attributes["deployment.environment"] == "staging"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "detective-eu")
    assert build_resource().attributes["service.name"] == "detective-eu"
    monkeypatch.delenv("OTEL_SERVICE_NAME")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes")
    assert build_resource().attributes["service.name"] == "from-attributes"


class _Refusing(BaseHTTPRequestHandler):
    """An OTLP endpoint that takes traces only, as some viewers do."""

    paths: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.paths.append(self.path)
        self.send_response(200 if self.path == "/v1/traces" else 405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_refused_metrics_export_is_logged_once_with_advice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv(ENDPOINT_ENV, f"http://127.0.0.1:{server.server_port}")
        telemetry = configure_telemetry(TelemetryConfig(data_dir=tmp_path), set_global=False)
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                telemetry.metrics.record_context(utilisation=0.5, strategy="none")
                telemetry.meter_provider.force_flush()
    finally:
        server.shutdown()
    assert _Refusing.paths.count("/v1/metrics") == 3
    refusals = [r for r in caplog.records if "metrics" in r.getMessage()]
    assert len(refusals) == 1, [r.getMessage() for r in refusals]
    message = refusals[0].getMessage()
    assert "HTTP 405" in message
    assert "OTEL_METRICS_EXPORTER=none" in message


@pytest.mark.parametrize(("env", "expected"), [("", 0), ("always_on", 1)])
def test_exemplars_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str, expected: int
) -> None:
    monkeypatch.setenv(EXEMPLAR_FILTER_ENV, env)
    reader = InMemoryMetricReader()
    telemetry = configure_telemetry(
        TelemetryConfig(data_dir=tmp_path), set_global=False, metric_readers=[reader]
    )
    with telemetry.tracer.start_as_current_span("a model call"):
        telemetry.metrics.record_tool(tool_name="t", success=True, duration_s=0.1)
    data = reader.get_metrics_data()
    assert data is not None
    [point] = [
        point
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == "detective.tool.duration"
        for point in metric.data.data_points
    ]
    assert len(point.exemplars) == expected
