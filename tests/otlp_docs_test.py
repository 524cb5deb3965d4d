"""The Collector configurations in docs/using/errors-and-traces.md are ones a Collector reads:
each pipeline names only components its configuration defines, each of a type the Collector
has (the names its components register, as in the contrib distribution's metadata.yaml files),
and they send to Detective's OTLP endpoint with the token header; the SDK variables name the
same endpoint. The two-tier setup routes by trace id and sends Detective the request spans
unsampled."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.urls import resolve

PAGE = Path(__file__).resolve().parent.parent / "docs" / "using" / "errors-and-traces.md"
ENDPOINT = "https://detective.example.com/otlp"
# The component types the page may use, by kind: the `type:` the Collector (core and contrib)
# registers each under; a misspelt one (`otlp_http`, `tailsampling`) fails to load there.
COMPONENTS = {
    "receivers": {"otlp"},
    "processors": {"batch", "filter", "tail_sampling", "memory_limiter"},
    "exporters": {"otlp", "otlphttp", "loadbalancing", "debug"},
}
KINDS = tuple(COMPONENTS)


def configs() -> list[dict[str, Any]]:
    text = PAGE.read_text(encoding="utf-8")
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def by_exporter(name: str) -> dict[str, Any]:
    [config] = [c for c in configs() if name in c.get("exporters", {})]
    return config


def pipeline_problems(config: dict[str, Any]) -> list[str]:
    """What a Collector would refuse to start with: a pipeline naming a component the
    configuration does not define, a component of a type the Collector has not, a pipeline
    without a receiver or an exporter, a pipeline of another signal."""
    problems = []
    for kind in KINDS:
        for name in config.get(kind) or {}:
            if name.split("/", 1)[0] not in COMPONENTS[kind]:
                problems.append(f"{kind} {name!r} is no Collector component")
    for pipeline, parts in config["service"]["pipelines"].items():
        if pipeline.split("/", 1)[0] not in {"traces", "logs", "metrics"}:
            problems.append(f"pipeline {pipeline!r} names no signal")
        for kind in KINDS:
            named = parts.get(kind) or []
            if kind != "processors" and not named:
                problems.append(f"pipeline {pipeline!r} has no {kind}")
            problems += [
                f"pipeline {pipeline!r} names {kind} {name!r}, not defined"
                for name in named
                if name not in (config.get(kind) or {})
            ]
    return problems


def test_every_configuration_names_only_defined_collector_components() -> None:
    found = configs()
    assert len(found) == 3
    for config in found:
        assert pipeline_problems(config) == []


@pytest.mark.parametrize(
    "broken",
    [
        {"exporters": {"otlp_http/detective": {}}},
        {"service": {"pipelines": {"traces": {"receivers": ["otlp"], "exporters": ["gone"]}}}},
        {"service": {"pipelines": {"traces": {"receivers": [], "exporters": ["debug"]}}}},
        {"service": {"pipelines": {"spans": {"receivers": ["otlp"], "exporters": ["debug"]}}}},
    ],
)
def test_the_check_finds_what_a_collector_refuses(broken: dict[str, Any]) -> None:
    config: dict[str, Any] = {
        "receivers": {"otlp": {}},
        "exporters": {"debug": {}},
        "service": {"pipelines": {"traces": {"receivers": ["otlp"], "exporters": ["debug"]}}},
    }
    assert pipeline_problems(config) == []
    config.update(broken)
    assert pipeline_problems(config) != []


def test_the_collector_config_exports_to_the_otlp_endpoint_with_the_token() -> None:
    config = configs()[0]
    exporter = config["exporters"]["otlphttp/detective"]
    # The otlphttp exporter appends /v1/traces: the site's route is /otlp/v1/traces.
    assert exporter["endpoint"] == ENDPOINT
    assert exporter["headers"]["Authorization"].startswith("Bearer ")
    pipeline = config["service"]["pipelines"]["traces"]
    assert pipeline["exporters"] == ["otlphttp/detective"]
    errors = config["processors"]["tail_sampling"]["policies"][0]
    assert errors["type"] == "status_code"
    assert errors["status_code"]["status_codes"] == ["ERROR"]
    [sdk] = re.findall(r"```sh\n(export OTEL.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert f"OTEL_EXPORTER_OTLP_ENDPOINT={ENDPOINT}\n" in sdk
    assert "service.version=" in sdk and "deployment.environment.name=" in sdk


def test_the_first_tier_routes_each_trace_whole() -> None:
    balancer = by_exporter("loadbalancing")["exporters"]["loadbalancing"]
    assert balancer["routing_key"] == "traceID"
    assert "otlp" in balancer["protocol"]
    assert balancer["resolver"]["dns"]["hostname"]


def test_the_second_tier_sends_detective_the_requests_unsampled() -> None:
    [config] = [c for c in configs() if "traces/detective" in c["service"]["pipelines"]]
    pipelines = config["service"]["pipelines"]
    detective = pipelines["traces/detective"]
    assert detective["exporters"] == ["otlphttp/detective"]
    assert "tail_sampling" not in detective["processors"]
    assert (
        config["exporters"]["otlphttp/detective"] == configs()[0]["exporters"]["otlphttp/detective"]
    )
    # The filter drops a span when its condition holds: it must keep requests and failures.
    [condition] = config["processors"]["filter/detective"]["traces"]["span"]
    assert "kind != SPAN_KIND_SERVER" in condition
    assert "kind != SPAN_KIND_CONSUMER" in condition
    assert "status.code != STATUS_CODE_ERROR" in condition
    assert condition.count(" and ") == 2 and " or " not in condition
    # Batches a bounded size: Detective refuses a body over 16 MB decompressed (413).
    [batch] = [p for p in detective["processors"] if p.split("/")[0] == "batch"]
    assert 0 < config["processors"][batch]["send_batch_max_size"] <= 2048
    # The trace store's pipeline samples; Detective's does not.
    store = next(p for name, p in pipelines.items() if name != "traces/detective")
    assert "tail_sampling" in store["processors"]


def test_the_route_is_where_the_exporters_send() -> None:
    assert resolve("/otlp/v1/traces").url_name == "traces"
