from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
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
    TelemetryConfig,
    active_telemetry,
    capture_content_default,
    configure_telemetry,
    shutdown_telemetry,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(ENDPOINT_ENV, raising=False)
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
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
