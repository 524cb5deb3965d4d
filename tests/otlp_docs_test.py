"""The Collector configuration in docs/using/errors-and-traces.md is one a Collector reads and
sends to Detective's OTLP endpoint with the token header; the SDK variables name the same."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from django.urls import resolve

PAGE = Path(__file__).resolve().parent.parent / "docs" / "using" / "errors-and-traces.md"


def test_the_collector_config_exports_to_the_otlp_endpoint_with_the_token() -> None:
    text = PAGE.read_text(encoding="utf-8")
    [block] = re.findall(r"```yaml\n(.*?)```", text, re.S)
    config = yaml.safe_load(block)
    exporter = config["exporters"]["otlphttp/detective"]
    # The otlphttp exporter appends /v1/traces: the site's route is /otlp/v1/traces.
    assert exporter["endpoint"].endswith("/otlp")
    assert exporter["headers"]["Authorization"].startswith("Bearer ")
    pipeline = config["service"]["pipelines"]["traces"]
    assert pipeline["exporters"] == ["otlphttp/detective"]
    assert set(pipeline["processors"]) <= set(config["processors"])
    assert set(pipeline["receivers"]) <= set(config["receivers"])
    errors = config["processors"]["tail_sampling"]["policies"][0]
    assert errors["status_code"]["status_codes"] == ["ERROR"]
    [sdk] = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert "OTEL_EXPORTER_OTLP_ENDPOINT=https://detective.example.com/otlp\n" in sdk
    assert exporter["endpoint"] == "https://detective.example.com/otlp"


def test_the_route_is_where_the_exporters_send() -> None:
    assert resolve("/otlp/v1/traces").url_name == "traces"
