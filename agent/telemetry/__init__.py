"""Observability for the agent core: traces, metrics and structured logs.

Tracing is by wrapping: each traced class takes a component and is one of the same kind, so
the loop holds no span code.

```
TracedAgent(Agent(                                        agent_run.py
    provider=TracedProvider(RetryingProvider(adapter)),   model_calls.py: "chat {model}", "retry"
    tools=TracedToolExecutor(registry),                   tool_calls.py: "execute_tool {name}"
    context=TracedContextManager(manager),                context_window.py: "context.fit"
))                                                        "invoke_agent detective"
```

The wrappers open the spans, set the GenAI semantic convention attributes (`gen_ai.*`) and the
spec's own (`detective.*`), record the metrics (`metrics.py`) and write the structured logs
(`logging.py`); what they share is in `wrapping.py`. Message content goes on spans only when
capture is on, in the shapes of `content.py`. One trace per conversation: `trace_context.py`.
`configure_telemetry` (`setup.py`) sets up the exporters once per process.
"""

from agent.telemetry.agent_run import SupportsSendMessage, TracedAgent
from agent.telemetry.context_window import TracedContextManager
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
from agent.telemetry.model_calls import TracedProvider
from agent.telemetry.setup import (
    Telemetry,
    TelemetryConfig,
    active_telemetry,
    capture_content_default,
    configure_telemetry,
    shutdown_telemetry,
)
from agent.telemetry.tool_calls import TracedToolExecutor
from agent.telemetry.trace_context import (
    current_traceparent,
    end_workflow,
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
    "capture_content_default",
    "configure_logging",
    "configure_telemetry",
    "conversation_scope",
    "current_traceparent",
    "end_workflow",
    "get_logger",
    "new_trace_id",
    "read_trace",
    "register_env_secrets",
    "register_secret",
    "shutdown_telemetry",
    "trace_path",
    "workflow_span",
]
