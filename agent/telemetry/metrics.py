"""The agent's metrics: one object holding every instrument, and a method per fact.

Names follow the OpenTelemetry GenAI semantic conventions where they define one
(`gen_ai.client.operation.duration`, `gen_ai.client.token.usage`, with their advised bucket
boundaries); the rest live under `detective.*`. The traced wrappers record them, so the
loop never touches an instrument.
"""

from __future__ import annotations

from opentelemetry import metrics
from opentelemetry.metrics import Meter

from agent.messages import Usage

METER_NAME = "agent"

# Boundaries the GenAI conventions advise for these two histograms.
DURATION_BUCKETS_S = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96,
    81.92,
)  # fmt: skip
TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216,
    67108864,
)  # fmt: skip
UTILISATION_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)

Attributes = dict[str, str | bool | int | float]
# Models a process talks to; a bound, should a caller make up model names.
_MAX_ATTRIBUTE_SETS = 64


class AgentMetrics:
    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or metrics.get_meter(METER_NAME)
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of a model call, streaming included.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS_S,
        )
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Input and output tokens of a model call.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.errors = meter.create_counter(
            "detective.client.errors",
            unit="{error}",
            description="Failed model calls, by error type and provider.",
        )
        self.retries = meter.create_counter(
            "detective.client.retries",
            unit="{retry}",
            description="Model call attempts that were retried.",
        )
        self.tool_duration = meter.create_histogram(
            "detective.tool.duration",
            unit="s",
            description="Duration of a tool execution.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS_S,
        )
        self.tool_calls = meter.create_counter(
            "detective.tool.calls",
            unit="{call}",
            description="Tool executions, by tool and success.",
        )
        self.context_utilisation = meter.create_histogram(
            "detective.context.utilisation",
            unit="1",
            description="Share of the context window the prompt fills.",
            explicit_bucket_boundaries_advisory=UTILISATION_BUCKETS,
        )
        self.cost = meter.create_counter(
            "detective.usage.cost",
            unit="USD",
            description="Estimated cost of model calls, from the price table.",
        )
        self._attribute_sets: dict[
            tuple[str, str, str], tuple[Attributes, Attributes, Attributes, Attributes]
        ] = {}

    def record_model_call(
        self,
        *,
        provider: str,
        request_model: str,
        duration_s: float,
        response_model: str | None = None,
        usage: Usage | None = None,
        cost_usd: float | None = None,
        error_type: str | None = None,
    ) -> None:
        if not error_type:
            # The common case, with attribute sets made once per model: building four dicts
            # per call was most of what recording cost on our side.
            sets = self._call_attributes(provider, request_model, response_model or "")
            self.operation_duration.record(duration_s, sets[0])
            if usage is not None:
                self.token_usage.record(usage.input_tokens, sets[1])
                self.token_usage.record(usage.output_tokens, sets[2])
            if cost_usd:
                self.cost.add(cost_usd, sets[3])
            return
        attributes: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": request_model,
        }
        if response_model:
            attributes["gen_ai.response.model"] = response_model
        if error_type:
            attributes["error.type"] = error_type
            self.errors.add(
                1,
                {
                    "error.type": error_type,
                    "gen_ai.provider.name": provider,
                    "gen_ai.request.model": request_model,
                },
            )
        self.operation_duration.record(duration_s, attributes)
        if usage is not None:
            self.token_usage.record(
                usage.input_tokens, {**attributes, "gen_ai.token.type": "input"}
            )
            self.token_usage.record(
                usage.output_tokens, {**attributes, "gen_ai.token.type": "output"}
            )
        if cost_usd:
            self.cost.add(
                cost_usd,
                {
                    "gen_ai.provider.name": provider,
                    "gen_ai.request.model": request_model,
                },
            )

    def _call_attributes(
        self, provider: str, request_model: str, response_model: str
    ) -> tuple[Attributes, Attributes, Attributes, Attributes]:
        key = (provider, request_model, response_model)
        sets = self._attribute_sets.get(key)
        if sets is None:
            base: Attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": request_model,
            }
            if response_model:
                base["gen_ai.response.model"] = response_model
            sets = (
                base,
                {**base, "gen_ai.token.type": "input"},
                {**base, "gen_ai.token.type": "output"},
                {"gen_ai.provider.name": provider, "gen_ai.request.model": request_model},
            )
            if len(self._attribute_sets) < _MAX_ATTRIBUTE_SETS:
                self._attribute_sets[key] = sets
        return sets

    def record_retry(self, *, provider: str, request_model: str, error_type: str) -> None:
        self.retries.add(
            1,
            {
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": request_model,
                "error.type": error_type,
            },
        )

    def record_tool(
        self,
        *,
        tool_name: str,
        success: bool,
        duration_s: float,
        error_type: str | None = None,
    ) -> None:
        attributes: Attributes = {
            "gen_ai.tool.name": tool_name,
            "detective.tool.success": success,
        }
        if error_type:
            attributes["error.type"] = error_type
        self.tool_duration.record(duration_s, attributes)
        self.tool_calls.add(1, attributes)

    def record_context(self, *, utilisation: float, strategy: str) -> None:
        self.context_utilisation.record(utilisation, {"detective.context.strategy": strategy})


_default: AgentMetrics | None = None


def default_metrics() -> AgentMetrics:
    """Instruments on the global meter provider. Created once: the API's proxy meter
    forwards them to whichever provider `configure_telemetry` installs later."""
    global _default
    if _default is None:
        _default = AgentMetrics()
    return _default
