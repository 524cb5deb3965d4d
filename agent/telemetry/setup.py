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
from opentelemetry.metrics import NoOpMeter
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, ExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from agent.telemetry.file_exporter import FileSpanExporter, TraceFileProcessor
from agent.telemetry.logging import register_env_secrets
from agent.telemetry.metrics import AgentMetrics

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
METRICS_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
TRACES_EXPORTER_ENV = "OTEL_TRACES_EXPORTER"
METRICS_EXPORTER_ENV = "OTEL_METRICS_EXPORTER"
CAPTURE_CONTENT_ENV = "DETECTIVE_CAPTURE_CONTENT"
EXEMPLAR_FILTER_ENV = "OTEL_METRICS_EXEMPLAR_FILTER"
TRACER_NAME = "agent"
DEFAULT_SERVICE_NAME = "detective"
# The SDK's default OTLP/HTTP endpoint, used when an exporter is asked for by name alone.
DEFAULT_OTLP_ENDPOINT = "http://localhost:4318"
EXPORTERS = frozenset({"otlp", "console", "none"})
# How long a finished trace, or a long one's spans, wait to be written with others.
FILE_EXPORT_DELAY_MS = 1000

_log = logging.getLogger(__name__)


def _env(name: str) -> str | None:
    return os.environ.get(name, "").strip() or None


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _env_endpoint() -> str | None:
    return _env(ENDPOINT_ENV)


def _env_traces_endpoint() -> str | None:
    return _env(TRACES_ENDPOINT_ENV)


def _env_metrics_endpoint() -> str | None:
    return _env(METRICS_ENDPOINT_ENV)


def _env_capture_content() -> bool:
    return _env_flag(CAPTURE_CONTENT_ENV)


def parse_exporters(value: str | None) -> frozenset[str] | None:
    """`OTEL_TRACES_EXPORTER` / `OTEL_METRICS_EXPORTER`: a comma-separated list of exporter
    names, None when unset. Names Detective does not know are left out with a warning."""
    if value is None or not value.strip():
        return None
    names = frozenset(part.strip().lower() for part in value.split(",") if part.strip())
    unknown = names - EXPORTERS
    if unknown:
        _log.warning(
            "unsupported OpenTelemetry exporter(s) %s ignored; use otlp, console or none",
            ", ".join(sorted(unknown)),
        )
    return names & EXPORTERS


def _env_traces_exporters() -> frozenset[str] | None:
    return parse_exporters(_env(TRACES_EXPORTER_ENV))


def _env_metrics_exporters() -> frozenset[str] | None:
    return parse_exporters(_env(METRICS_EXPORTER_ENV))


@dataclass(frozen=True)
class TelemetryConfig:
    """What to export where. The defaults read the OpenTelemetry SDK's standard variables.

    OTLP export of a signal is on when its exporter list (`OTEL_TRACES_EXPORTER`,
    `OTEL_METRICS_EXPORTER`) names `otlp`, or, with no list, when an endpoint is set
    (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the signal's own `..._TRACES_ENDPOINT` /
    `..._METRICS_ENDPOINT`, a full URL). `none` turns the signal's export off (the trace files
    stay: they are the run page's). Headers, timeouts, compression and certificates are read
    by the OTLP exporters themselves (`OTEL_EXPORTER_OTLP_HEADERS` ...), and the resource by
    the SDK (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`); `service_name` is the name
    used when neither names the service.
    """

    data_dir: Path
    service_name: str = DEFAULT_SERVICE_NAME
    otlp_endpoint: str | None = field(default_factory=_env_endpoint)
    otlp_traces_endpoint: str | None = field(default_factory=_env_traces_endpoint)
    otlp_metrics_endpoint: str | None = field(default_factory=_env_metrics_endpoint)
    traces_exporters: frozenset[str] | None = field(default_factory=_env_traces_exporters)
    metrics_exporters: frozenset[str] | None = field(default_factory=_env_metrics_exporters)
    # Prompts, completions and tool arguments go into spans and logs only when on.
    capture_content: bool = field(default_factory=_env_capture_content)
    file_export: bool = True

    @property
    def traces_dir(self) -> Path:
        return Path(self.data_dir) / "traces"

    @property
    def otlp_traces_url(self) -> str | None:
        """Where spans go over OTLP/HTTP, or None when they do not."""
        return self._otlp_url("traces", self.traces_exporters, self.otlp_traces_endpoint)

    @property
    def otlp_metrics_url(self) -> str | None:
        return self._otlp_url("metrics", self.metrics_exporters, self.otlp_metrics_endpoint)

    @property
    def console_traces(self) -> bool:
        return self.traces_exporters is not None and "console" in self.traces_exporters

    @property
    def console_metrics(self) -> bool:
        return self.metrics_exporters is not None and "console" in self.metrics_exporters

    def _otlp_url(
        self, signal: str, exporters: frozenset[str] | None, signal_endpoint: str | None
    ) -> str | None:
        if exporters is not None and "otlp" not in exporters:
            return None
        if signal_endpoint:
            return signal_endpoint
        if self.otlp_endpoint:
            return _signal_url(self.otlp_endpoint, signal)
        if exporters is not None:  # asked for by name, with no endpoint: the SDK's default
            return _signal_url(DEFAULT_OTLP_ENDPOINT, signal)
        return None


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


def _signal_url(endpoint: str, signal: str) -> str:
    # OTEL_EXPORTER_OTLP_ENDPOINT is a base URL; the signal's path is appended (the spec).
    return f"{endpoint.rstrip('/')}/v1/{signal}"


def build_resource(service_name: str = DEFAULT_SERVICE_NAME) -> Resource:
    """The SDK's resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME win), named
    `service_name` when they name no service."""
    resource = Resource.create({})
    name = resource.attributes.get("service.name")
    if not isinstance(name, str) or name.startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": service_name}))
    return resource


class _RefusedExportFilter(logging.Filter):
    """The OTLP exporters log every failed export; an endpoint that refuses a signal (a 4xx:
    a collector that takes traces only answers 404 or 405 to metrics) would say so every
    minute. The first such refusal is logged with what to do, later ones not at all."""

    def __init__(self, signal: str, url: str, switch: str) -> None:
        super().__init__()
        self.signal = signal
        self.url = url
        self.switch = switch
        self.reported = False

    def filter(self, record: logging.LogRecord) -> bool:
        code = _refusal_code(record)
        if code is None:
            return True
        if self.reported:
            return False
        self.reported = True
        record.msg = (
            "the OTLP endpoint %s refused %s with HTTP %s: it may not take this signal. "
            "Set %s=none to stop exporting %s, or point %s at a collector that takes them. "
            "Further refusals are not logged."
        )
        endpoint_env = TRACES_ENDPOINT_ENV if self.signal == "traces" else METRICS_ENDPOINT_ENV
        record.args = (self.url, self.signal, code, self.switch, self.signal, endpoint_env)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _refusal_code(record: logging.LogRecord) -> int | None:
    if not isinstance(record.msg, str) or not record.msg.startswith("Failed to export"):
        return None
    args = record.args if isinstance(record.args, tuple) else ()
    for arg in args:
        if isinstance(arg, int) and 400 <= arg < 500:
            return arg
    return None


def _quiet_refusals(logger_name: str, refused: _RefusedExportFilter) -> None:
    logger = logging.getLogger(logger_name)
    for old in [f for f in logger.filters if isinstance(f, _RefusedExportFilter)]:
        logger.removeFilter(old)
    logger.addFilter(refused)


def _exemplar_filter() -> ExemplarFilter | None:
    """No exemplars unless OTEL_METRICS_EXEMPLAR_FILTER asks (None: the SDK reads it). The
    SDK's default looks at the current span for every measurement, a cost on each model and
    tool call for links our OTLP viewers do not show."""
    if os.environ.get(EXEMPLAR_FILTER_ENV, "").strip():
        return None
    return AlwaysOffExemplarFilter()


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
    resource = build_resource(config.service_name)
    tracer_provider = TracerProvider(resource=resource)
    file_exporter: FileSpanExporter | None = None
    if config.file_export:
        file_exporter = FileSpanExporter(config.traces_dir)
        tracer_provider.add_span_processor(
            TraceFileProcessor(file_exporter, delay_s=FILE_EXPORT_DELAY_MS / 1000)
        )
    readers = list(metric_readers)
    traces_url, metrics_url = config.otlp_traces_url, config.otlp_metrics_url
    # Imported only when used: the OTLP exporters pull in requests and protobuf, which a
    # process without a collector has no use for.
    if traces_url:
        from opentelemetry.exporter.otlp.proto.http import trace_exporter

        _quiet_refusals(
            trace_exporter.__name__,
            _RefusedExportFilter("traces", traces_url, TRACES_EXPORTER_ENV),
        )
        tracer_provider.add_span_processor(
            BatchSpanProcessor(trace_exporter.OTLPSpanExporter(endpoint=traces_url))
        )
    if metrics_url:
        from opentelemetry.exporter.otlp.proto.http import metric_exporter

        _quiet_refusals(
            metric_exporter.__name__,
            _RefusedExportFilter("metrics", metrics_url, METRICS_EXPORTER_ENV),
        )
        readers.append(
            PeriodicExportingMetricReader(metric_exporter.OTLPMetricExporter(endpoint=metrics_url))
        )
    if config.console_traces:
        tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    if config.console_metrics:
        readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
    for processor in span_processors:
        tracer_provider.add_span_processor(processor)
    meter_provider = MeterProvider(
        resource=resource, metric_readers=readers, exemplar_filter=_exemplar_filter()
    )

    if set_global:
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(meter_provider)

    _active = Telemetry(
        config=config,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        metrics=AgentMetrics(_agent_meter(meter_provider, readers)),
        file_exporter=file_exporter,
    )
    return _active


def _agent_meter(meter_provider: MeterProvider, readers: Sequence[MetricReader]) -> metrics.Meter:
    """The meter the agent's instruments live on. With no reader nothing could ever collect a
    measurement (a MeterProvider takes its readers when built, none later), so the API's no-op
    meter: recording 19 points an assessment into the SDK cost 0.6 M instructions (a fifth of
    the telemetry's) for nothing. A process that exports metrics records them as before."""
    if not readers:
        return NoOpMeter(TRACER_NAME)
    return meter_provider.get_meter(TRACER_NAME)


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
