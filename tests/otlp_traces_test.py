"""Traces from the real OpenTelemetry Python SDK, through its real OTLP/HTTP exporter
(`OTLPSpanExporter`, configured by the SDK's own environment variables as the docs tell a user),
to a live site: what is kept of them, and the verdict of a release whose only sign is a new
exception in one of its three routes (tests green, the service-wide error rate flat), with the
commit whose changed line the exception's frame runs through named as its first suspect; the
release before never mentions it."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from django.db.models import Sum
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from detective_client.records import CommitRecord, FileChangeRecord
from releases.models import Release, Service
from sources import services as sources_services
from sources.judging import judge_release
from sources.services import Origin
from tests.live_site import LiveSite
from traces.models import ErrorGroup, ErrorRelease, RouteMinute

pytestmark = pytest.mark.django_db(transaction=True)
API_KEY = "k" * 40

PRICING = (
    "def line_total(price, quantity):\n"
    "    unit = price / quantity\n"
    "    return round(unit * quantity, 2)\n"
)
CART = "GET /cart/{cart_id}/total"
ROUTES = ("/cart/{cart_id}/total", "/products", "/health")
GREEN = {"passed": 40, "failed": 0, "skipped": 0}
FLAT = {"error_rate": 0.004, "response_time_p95": 120.0}


def shop_module(root: Path) -> ModuleType:
    """The service's code as a real file, so the exception's stack trace is Python's own."""
    (root / "shop").mkdir()
    (root / "shop" / "pricing.py").write_text(PRICING)
    spec = importlib.util.spec_from_file_location("shop_pricing", root / "shop" / "pricing.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def serve(version: str, pricing: ModuleType, *, failing: bool, calls: bool = False) -> list:  # type: ignore[type-arg]
    """60 requests of each route, as a web framework's instrumentation records them; with
    `failing`, 1 in 6 of the cart's divide by zero; with `calls`, the cart's request reads
    its lines from the database first (a CLIENT span under the request's)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "shop", "service.version": version})
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("shop.web")
    for n in range(60):
        for route in ROUTES:
            with tracer.start_as_current_span(
                f"GET {route}",
                kind=SpanKind.SERVER,
                record_exception=False,
                set_status_on_exception=False,
                attributes={"http.route": route, "http.request.method": "GET"},
            ) as span:
                status = 200
                if route == ROUTES[0]:
                    if calls:
                        with tracer.start_as_current_span(
                            "SELECT shop.cart_line", kind=SpanKind.CLIENT
                        ):
                            pass
                    try:
                        pricing.line_total(12.5, 0 if failing and n % 6 == 0 else 2)
                    except ZeroDivisionError as exc:
                        span.record_exception(exc)
                        span.set_status(Status(StatusCode.ERROR, str(exc)))
                        status = 500
                span.set_attribute("http.response.status_code", status)
    provider.shutdown()
    return list(memory.get_finished_spans())


def export(site: LiveSite, token: str, spans: list, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[type-arg]
    # The SDK's own variables, as docs/using/errors-and-traces.md gives them.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{site.url}/otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{token}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    exporter = OTLPSpanExporter()
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS, site.log_text()
    finally:
        exporter.shutdown()


def drill(site: LiveSite, version: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{site.url}/api/releases/{version}/traces",
        params={"service": "shop"},
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def release(service: Service, version: str, deployed: datetime) -> Release:
    return Release.objects.create(
        service=service,
        version=version,
        changes=["feat(cart): totals per line"],
        test_results=GREEN,
        deployment_metrics=FLAT,
        deployed_at=deployed,
    )


def culprit_commit(target: Release) -> str:
    """1.1.0's range: one commit that wrote line 2 of shop/pricing.py (the division)."""
    sha = "a1b2c3d4" * 5
    record = CommitRecord(
        sha=sha,
        author_name="Ana Lima",
        author_email="ana@example.com",
        authored_at=datetime.now(UTC) - timedelta(hours=3),
        message="Round prices per line",
        files=(FileChangeRecord("shop/pricing.py", None, 2, 1, hunks=((2, 1, 2, 2),)),),
        parents=("f" * 40,),
    )
    sources_services.ingest_commits(target, [record], Origin("api"))
    return sha


def test_real_sdk_spans_make_a_new_exception_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pricing = shop_module(tmp_path)
    shop = Service.objects.create(name="shop", slug="shop")
    _, token = sources_services.create_token("otel of shop", shop)
    now = datetime.now(UTC)
    before = release(shop, "1.0.0", now - timedelta(days=2))
    after = release(shop, "1.1.0", now - timedelta(hours=1))
    sha = culprit_commit(after)
    with LiveSite(tmp_path / "logs", {"DETECTIVE_API_TOKEN": API_KEY}, workers=0) as site:
        export(site, token, serve("1.0.0", pricing, failing=False), monkeypatch)
        export(site, token, serve("1.1.0", pricing, failing=True), monkeypatch)
        drilled = drill(site, "1.1.0")
        assert drill(site, "1.0.0")["error_groups"] == []
        # The small profile's brief view of the summary says it in a line.
        brief = httpx.get(
            f"{site.url}/api/releases/1.1.0/summary",
            params={"view": "brief", "service": "shop"},
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=30,
        )
        assert brief.status_code == 200, brief.text
        said = [
            line for line in json.dumps(brief.json()).split('", "') if "ZeroDivisionError" in line
        ]
        assert said and "GET /cart/{cart_id}/total" in said[0], brief.json()
    [new] = drilled["error_groups"]
    assert (new["status"], new["exception_type"], new["count"]) == ("new", "ZeroDivisionError", 10)
    assert new["routes"] == {CART: 10}
    assert new["suspect"]["sha"] == sha and new["suspect"]["subject"] == "Round prices per line"
    cart = next(r for r in drilled["routes"] if r["route"] == CART)
    assert cart["release"]["requests"] == 60 and cart["release"]["errors"] == 10
    assert cart["release"]["p95_ms"] is not None and cart["baseline"] is None

    def figures(version: str, route: str) -> tuple[int, int]:
        totals = RouteMinute.objects.filter(release__version=version, route=route).aggregate(
            requests=Sum("requests"), errors=Sum("errors")
        )
        return totals["requests"], totals["errors"]

    assert figures("1.0.0", CART) == (60, 0)
    assert figures("1.1.0", CART) == (60, 10)
    assert figures("1.1.0", "GET /products") == (60, 0)
    group = ErrorGroup.objects.get()
    assert group.exception_type == "ZeroDivisionError"
    assert group.frames[-1][0].endswith("shop/pricing.py") and group.frames[-1][2] == "line_total"
    assert "ZeroDivisionError: float division by zero" in group.stacktrace
    here = ErrorRelease.objects.get(release=after)
    assert len(here.exemplars) == 5
    assert not ErrorRelease.objects.filter(release=before).exists()

    judged = judge_release(after).verdict
    assert judged.severity in ("medium", "high"), judged.as_dict()
    evidence = " ".join(judged.evidence())
    assert (
        "ZeroDivisionError in shop/pricing.py `line_total`: 10 of 60 requests of "
        "GET /cart/{cart_id}/total since 1.1.0 (none before); new in this release"
    ) in evidence, evidence
    assert f"first suspect {sha[:7]} 'Round prices per line' (Ana Lima)" in evidence
    earlier = judge_release(before).verdict
    assert "ZeroDivisionError" not in " ".join(earlier.evidence()) + str(earlier.as_dict())
    assert earlier.severity == "low", earlier.as_dict()


def test_real_sdk_spans_sent_before_their_release_are_held_then_become_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new version serves (and its SDK exports) before the pipeline sends its release."""
    pricing = shop_module(tmp_path)
    shop = Service.objects.create(name="shop", slug="shop")
    _, token = sources_services.create_token("otel of shop", shop)
    with LiveSite(tmp_path / "logs", {"DETECTIVE_API_TOKEN": API_KEY}, workers=0) as site:
        export(site, token, serve("1.2.0", pricing, failing=True, calls=True), monkeypatch)
        assert not Release.objects.filter(version="1.2.0").exists()
        made = httpx.post(
            f"{site.url}/api/releases",
            json={
                "service": "shop",
                "version": "1.2.0",
                "deployed_at": (datetime.now(UTC) - timedelta(hours=1)).isoformat(),
            },
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert made.status_code == 201, made.text
        drilled = drill(site, "1.2.0")
    [new] = drilled["error_groups"]
    assert (new["status"], new["exception_type"], new["count"]) == ("new", "ZeroDivisionError", 10)
    assert new["routes"] == {CART: 10}
    cart = next(r for r in drilled["routes"] if r["route"] == CART)
    assert (cart["release"]["requests"], cart["release"]["errors"]) == (60, 10)
    sample = drilled["sample_trace"]
    assert sample["exception_type"] == "ZeroDivisionError" and sample["spans_seen"] == 2
    request, call = sample["spans"]
    assert (request["kind"], request["error"], request["exception"]) == (
        "server",
        True,
        "ZeroDivisionError",
    )
    assert (call["name"], call["kind"], call["parent_span_id"]) == (
        "SELECT shop.cart_line",
        "client",
        request["span_id"],
    )
