from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

from agent.messages import Usage
from agent.telemetry.metrics import (
    DURATION_BUCKETS_S,
    TOKEN_BUCKETS,
    AgentMetrics,
    default_metrics,
)


class Recorded:
    def __init__(self, reader: InMemoryMetricReader) -> None:
        self.reader = reader

    def metric(self, name: str) -> Any:
        data = self.reader.get_metrics_data()
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for item in scope.metrics:
                    if item.name == name:
                        return item
        return None

    def points(self, name: str) -> dict[frozenset[tuple[str, Any]], Any]:
        item = self.metric(name)
        if item is None:
            return {}
        return {frozenset((p.attributes or {}).items()): p for p in item.data.data_points}


@pytest.fixture
def recorded() -> Iterator[tuple[AgentMetrics, Recorded]]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield AgentMetrics(provider.get_meter("test")), Recorded(reader)
    provider.shutdown()


BASE = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "anthropic",
    "gen_ai.request.model": "claude-sonnet-4",
}


def _key(**attributes: Any) -> frozenset[tuple[str, Any]]:
    return frozenset(attributes.items())


def test_model_call(recorded: tuple[AgentMetrics, Recorded]) -> None:
    metrics, seen = recorded
    metrics.record_model_call(
        provider="anthropic",
        request_model="claude-sonnet-4",
        response_model="claude-sonnet-4-20250514",
        duration_s=1.5,
        usage=Usage(input_tokens=1000, output_tokens=200),
        cost_usd=0.006,
    )

    with_response = {**BASE, "gen_ai.response.model": "claude-sonnet-4-20250514"}
    duration = seen.metric("gen_ai.client.operation.duration")
    assert duration.unit == "s"
    [point] = duration.data.data_points
    assert isinstance(point, HistogramDataPoint)
    assert dict(point.attributes) == with_response
    assert (point.count, point.sum) == (1, 1.5)
    assert tuple(point.explicit_bounds) == DURATION_BUCKETS_S

    tokens = seen.points("gen_ai.client.token.usage")
    assert tokens[_key(**with_response, **{"gen_ai.token.type": "input"})].sum == 1000
    assert tokens[_key(**with_response, **{"gen_ai.token.type": "output"})].sum == 200
    assert tuple(next(iter(tokens.values())).explicit_bounds) == TOKEN_BUCKETS

    cost = seen.metric("detective.usage.cost")
    assert cost.unit == "USD"
    assert cost.data.data_points[0].value == pytest.approx(0.006)
    assert seen.metric("detective.client.errors") is None


def test_failed_model_call(recorded: tuple[AgentMetrics, Recorded]) -> None:
    metrics, seen = recorded
    for _ in range(2):
        metrics.record_model_call(
            provider="anthropic",
            request_model="claude-sonnet-4",
            duration_s=0.2,
            error_type="RateLimitError",
        )

    errors = seen.points("detective.client.errors")
    expected = _key(
        **{
            "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": "claude-sonnet-4",
            "error.type": "RateLimitError",
        }
    )
    assert errors[expected].value == 2
    [point] = seen.points("gen_ai.client.operation.duration").values()
    assert dict(point.attributes)["error.type"] == "RateLimitError"
    assert seen.metric("gen_ai.client.token.usage") is None
    assert seen.metric("detective.usage.cost") is None


def test_retries(recorded: tuple[AgentMetrics, Recorded]) -> None:
    metrics, seen = recorded
    metrics.record_retry(provider="openai", request_model="gpt-4o", error_type="ServerError")
    [point] = seen.points("detective.client.retries").values()
    assert point.value == 1
    assert dict(point.attributes)["error.type"] == "ServerError"


def test_tools(recorded: tuple[AgentMetrics, Recorded]) -> None:
    metrics, seen = recorded
    metrics.record_tool(tool_name="get_release_summary", success=True, duration_s=0.05)
    metrics.record_tool(
        tool_name="get_release_summary",
        success=False,
        duration_s=5.0,
        error_type="ToolTimeoutError",
    )
    calls = seen.points("detective.tool.calls")
    ok = _key(**{"gen_ai.tool.name": "get_release_summary", "detective.tool.success": True})
    failed = _key(
        **{
            "gen_ai.tool.name": "get_release_summary",
            "detective.tool.success": False,
            "error.type": "ToolTimeoutError",
        }
    )
    assert calls[ok].value == 1
    assert calls[failed].value == 1
    durations = seen.points("detective.tool.duration")
    assert durations[failed].sum == 5.0


def test_context_utilisation(recorded: tuple[AgentMetrics, Recorded]) -> None:
    metrics, seen = recorded
    metrics.record_context(utilisation=0.42, strategy="none")
    [point] = seen.points("detective.context.utilisation").values()
    assert dict(point.attributes) == {"detective.context.strategy": "none"}
    assert point.sum == pytest.approx(0.42)


def test_default_metrics_is_one_instance() -> None:
    assert default_metrics() is default_metrics()
