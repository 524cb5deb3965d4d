"""Start-up of tracing and metrics: providers, exporters, the process-wide defaults.

`configure_telemetry` is called once by whoever owns the process (the CLI, the Django
worker). It is idempotent: a second call returns the handles of the first. The handles
(`Telemetry`) expose the tracer and the metrics so a caller can pass them to the traced
wrappers explicitly; tests build their own providers with in-memory exporters and never
touch the global ones (`set_global=False`, or no call at all).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from agent.telemetry.file_exporter import FileSpanExporter
from agent.telemetry.logging import register_env_secrets
from agent.telemetry.metrics import AgentMetrics

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
CAPTURE_CONTENT_ENV = "DETECTIVE_CAPTURE_CONTENT"
TRACER_NAME = "agent"
# Trace pages read the files while a run is going: flush them more often than the
# SDK's five-second default, still in batches.
FILE_EXPORT_DELAY_MS = 1000

_log = logging.getLogger(__name__)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _env_endpoint() -> str | None:
    return os.environ.get(ENDPOINT_ENV, "").strip() or None


def _env_capture_content() -> bool:
    return _env_flag(CAPTURE_CONTENT_ENV)


@dataclass(frozen=True)
class TelemetryConfig:
    data_dir: Path
    service_name: str = "detective"
    otlp_endpoint: str | None = field(default_factory=_env_endpoint)
    # Prompts, completions and tool arguments go into spans and logs only when on.
    capture_content: bool = field(default_factory=_env_capture_content)
    file_export: bool = True

    @property
    def traces_dir(self) -> Path:
        return Path(self.data_dir) / "traces"


@dataclass
class Telemetry:
    config: TelemetryConfig
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    metrics: AgentMetrics
    file_exporter: FileSpanExporter | None = None

    @functools.cached_property
    def tracer(self) -> trace.Tracer:
        # Once: the SDK's get_tracer re-registers a warnings filter on every call, which
        # cost more than a whole traced model call when every run asked for it again.
        return self.tracer_provider.get_tracer(TRACER_NAME)

    @property
    def capture_content(self) -> bool:
        return self.config.capture_content

    def force_flush(self) -> None:
        """Write every finished span now (before reading a trace file, before exit)."""
        self.tracer_provider.force_flush()
        self.meter_provider.force_flush()

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


_active: Telemetry | None = None


def _otlp_url(endpoint: str, signal: str) -> str:
    # The exporters take the full signal URL; the environment variable holds the base.
    return f"{endpoint.rstrip('/')}/v1/{signal}"


def configure_telemetry(
    config: TelemetryConfig,
    *,
    set_global: bool = True,
    span_processors: Sequence[SpanProcessor] = (),
    metric_readers: Sequence[MetricReader] = (),
) -> Telemetry:
    """Set up tracing (file and OTLP exporters) and metrics; return the handles.

    Idempotent: once configured, later calls return the same handles, whatever their
    arguments. `span_processors` and `metric_readers` are added alongside the exporters
    the config asks for (tests pass in-memory ones).
    """
    global _active
    if _active is not None:
        if _active.config != config:
            _log.warning("telemetry is already configured; keeping the first setup")
        return _active

    # Spans and logs scrub registered secrets; keys in the environment are known now.
    register_env_secrets()
    resource = Resource.create({"service.name": config.service_name})
    tracer_provider = TracerProvider(resource=resource)
    file_exporter: FileSpanExporter | None = None
    if config.file_export:
        file_exporter = FileSpanExporter(config.traces_dir)
        tracer_provider.add_span_processor(
            BatchSpanProcessor(file_exporter, schedule_delay_millis=FILE_EXPORT_DELAY_MS)
        )
    readers = list(metric_readers)
    if config.otlp_endpoint:
        # Imported here: the OTLP exporters pull in requests and protobuf, which a
        # process without a collector has no use for.
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter,
        )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter,
        )

        tracer_provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=_otlp_url(config.otlp_endpoint, "traces")))
        )
        readers.append(
            PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=_otlp_url(config.otlp_endpoint, "metrics"))
            )
        )
    for processor in span_processors:
        tracer_provider.add_span_processor(processor)
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)

    if set_global:
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(meter_provider)

    _active = Telemetry(
        config=config,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        metrics=AgentMetrics(meter_provider.get_meter(TRACER_NAME)),
        file_exporter=file_exporter,
    )
    return _active


def active_telemetry() -> Telemetry | None:
    return _active


def shutdown_telemetry() -> None:
    """Flush and stop the configured providers. A later `configure_telemetry` builds new
    ones, but OpenTelemetry lets a process install global providers only once."""
    global _active
    if _active is not None:
        _active.shutdown()
        _active = None


def capture_content_default() -> bool:
    """Whether wrappers built without an explicit choice record content."""
    if _active is not None:
        return _active.config.capture_content
    return _env_capture_content()
