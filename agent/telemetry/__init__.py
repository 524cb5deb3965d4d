"""Observability for the agent core: traces, metrics and structured logs.

Instrumentation wraps components in objects of the same interface (`TracedProvider`,
`TracedToolExecutor`, `TracedContextManager`, `TracedAgent`), so the loop holds no span
code. `configure_telemetry` sets up the exporters once per process.
"""

from agent.telemetry.file_exporter import FileSpanExporter, read_trace, trace_path
from agent.telemetry.logging import (
    JsonFormatter,
    configure_logging,
    conversation_scope,
    get_logger,
    register_env_secrets,
    register_secret,
)
from agent.telemetry.metrics import AgentMetrics
from agent.telemetry.setup import (
    Telemetry,
    TelemetryConfig,
    active_telemetry,
    configure_telemetry,
    shutdown_telemetry,
)
from agent.telemetry.tracing import (
    SupportsSendMessage,
    TracedAgent,
    TracedContextManager,
    TracedProvider,
    TracedToolExecutor,
    current_traceparent,
    new_trace_id,
    workflow_span,
)

__all__ = [
    "AgentMetrics",
    "FileSpanExporter",
    "JsonFormatter",
    "SupportsSendMessage",
    "Telemetry",
    "TelemetryConfig",
    "TracedAgent",
    "TracedContextManager",
    "TracedProvider",
    "TracedToolExecutor",
    "active_telemetry",
    "configure_logging",
    "configure_telemetry",
    "conversation_scope",
    "current_traceparent",
    "get_logger",
    "new_trace_id",
    "read_trace",
    "register_env_secrets",
    "register_secret",
    "shutdown_telemetry",
    "trace_path",
    "workflow_span",
]
