"""A release whose only sign is a new exception in one of its routes: the verdict API, the
Markdown summary a CI job writes from it and the webhooks' payload all carry the new error
group, with its exception, route, counts and first suspect commit (issue 36, item 7)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from detective_client.records import CommitRecord, FileChangeRecord
from detective_client.summary import markdown
from detective_client.verdict import exit_code
from releases.models import Release, Service
from sources import services as sources_services
from sources.selectors import token_for
from tests.otlp_requests import request, span
from traces import services
from traces.otlp.spans import read_spans
from webhooks.services import event_body

pytestmark = pytest.mark.django_db
KEY = "k" * 40
CART = "GET /cart/{cart_id}/total"
SHA = "a1b2c3d4" * 5
# A subject as long as many are: the summary's line must not cut the suspect off.
SUBJECT = "Round prices per line so that cart totals match the printed invoice"
STACK = """Traceback (most recent call last):
  File "/srv/app/shop/views.py", line 30, in cart_total
    return {"total": line_total(cart)}
  File "/srv/app/shop/pricing.py", line 2, in line_total
    unit = price / quantity
ZeroDivisionError: float division by zero
"""
GREEN = {"passed": 40, "failed": 0, "skipped": 0}
FLAT = {"error_rate": 0.004, "response_time_p95": 120.0}


def make(shop: Service, version: str, deployed: datetime) -> Release:
    return Release.objects.create(
        service=shop,
        version=version,
        changes=["feat(cart): totals per line"],
        test_results=GREEN,
        deployment_metrics=FLAT,
        deployed_at=deployed,
    )


def send(token: Any, version: str, start_ns: int, *, failing: bool) -> None:
    error = ("ZeroDivisionError", "float division by zero", STACK)
    spans = [
        span(3 * n + i, start_ns + n * 10**8, route=route,
             exception=error if failing and i == 0 and n % 6 == 0 else None)
        for n in range(60)
        for i, route in enumerate(("/cart/{cart_id}/total", "/products", "/health"))
    ]  # fmt: skip
    services.ingest(token, read_spans(request("shop", version, spans)))


@pytest.fixture
def released(settings: Any) -> Release:
    settings.DETECTIVE_API_KEY = KEY
    shop = Service.objects.create(name="shop", slug="shop")
    token = token_for(sources_services.create_token("otel", shop)[1])
    now = datetime.now(UTC)
    before = make(shop, "1.0.0", now - timedelta(days=2))
    after = make(shop, "1.1.0", now - timedelta(hours=1))
    record = CommitRecord(
        sha=SHA,
        author_name="Ana Lima",
        author_email="ana@example.com",
        authored_at=now - timedelta(hours=3),
        message=SUBJECT,
        files=(FileChangeRecord("shop/pricing.py", None, 2, 1, hunks=((2, 1, 2, 2),)),),
        parents=("f" * 40,),
    )
    sources_services.ingest_commits(after, [record], sources_services.Origin("api"))
    start = time.time_ns() - 20 * 60 * 10**9
    send(token, "1.0.0", start - 2 * 86_400 * 10**9 + 3_600 * 10**9, failing=False)
    send(token, "1.1.0", start, failing=True)
    assert before.pk
    return after


def said_whole(text: str) -> None:
    """The new group as every channel must say it: exception, route, counts, first suspect."""
    assert "ZeroDivisionError" in text, text
    assert CART in text, text
    assert "10 of 60" in text, text
    assert SHA[:7] in text and SUBJECT in text, text


def test_the_verdict_api_the_markdown_summary_and_the_webhook_carry_the_new_group(
    released: Release,
) -> None:
    answer = Client().get(
        "/api/releases/1.1.0/verdict",
        {"service": "shop"},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert answer.status_code == 200, answer.content
    verdict = answer.json()
    assert verdict["severity"] in ("medium", "high"), verdict
    found = [f["text"] for f in verdict["findings"] if "ZeroDivisionError" in f["text"]]
    assert found, verdict["findings"]
    said_whole(found[0])

    summary = markdown(verdict, "shop", exit_code(verdict, "high"), "high")
    line = next(line for line in summary.splitlines() if "ZeroDivisionError" in line)
    said_whole(line.replace("\\", ""))

    body = json.loads(event_body(released, "verdict.changed"))
    hooked = [f["text"] for f in body["findings"] if "ZeroDivisionError" in f["text"]]
    assert hooked, body["findings"]
    said_whole(hooked[0])
