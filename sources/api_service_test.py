"""One API: every release endpoint honours `?service=` (a release that exists only in a
non-default service is found with it and not without it), and each kind of token reads what
its doc says and is refused, with the reason, elsewhere."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from assessments import services as releases_services
from releases.models import Conversation, Release, Service
from sources import services

pytestmark = pytest.mark.django_db
API_KEY = "k" * 40
VERSION = "v2.0.0"  # exists in the service shop only
READS = [
    ("GET", f"/api/releases/{VERSION}/summary"),
    ("GET", f"/api/releases/{VERSION}/verdict"),
    ("GET", f"/api/releases/{VERSION}/tests"),
    ("GET", f"/api/releases/{VERSION}/changes"),
    ("GET", f"/api/releases/{VERSION}/metrics/error_rate/history"),
]
WRITES = [
    ("POST", f"/api/releases/{VERSION}/commits", "application/json", b'{"commits": []}'),
    ("POST", f"/api/releases/{VERSION}/junit", "application/xml", b"<testsuite/>"),
    ("POST", f"/api/releases/{VERSION}/metrics", "text/plain", b"# EOF\n"),
    ("POST", f"/api/releases/{VERSION}/assess", "application/json", b""),
]


@pytest.fixture(autouse=True)
def _api_key(settings: Any) -> None:
    settings.DETECTIVE_API_KEY = API_KEY


@pytest.fixture
def shop_release(make_release: Callable[..., Release]) -> Release:
    made = make_release(VERSION)
    made.service = Service.objects.create(name="Shop", slug="shop")
    made.save()
    return made


def call(method: str, path: str, token: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    client = Client()
    headers = {"Authorization": f"Bearer {token}"}
    if method == "GET":
        response = client.get(path, headers=headers)
    else:
        response = client.post(path, headers=headers, **extra)
    return response.status_code, response.json()


@pytest.mark.parametrize(("method", "path"), READS, ids=[p.split("/", 4)[-1] for _, p in READS])
def test_every_read_honours_the_service(shop_release: Release, method: str, path: str) -> None:
    status, body = call(method, path, API_KEY)
    assert status == 404 and f"No release {VERSION!r}" in body["error"], body
    for named in ("shop", "Shop"):
        status, body = call(method, f"{path}?service={named}", API_KEY)
        assert status != 404 or "No release" not in body["error"], (named, body)
        assert status in (200, 404), body
    status, body = call(method, f"{path}?service=billing", API_KEY)
    assert status == 404 and "of the service 'billing'" in body["error"], body


def test_the_summary_and_the_verdict_read_the_named_services_release(
    shop_release: Release, make_release: Callable[..., Release]
) -> None:
    make_release("v3.0.0", changes=["Default's change"])
    shop = make_release("v3.0.0-shop", changes=["Shop's change"])
    Release.objects.filter(pk=shop.pk).update(version="v3.0.0", service=shop_release.service)
    _, summary = call("GET", "/api/releases/v3.0.0/summary?service=shop", API_KEY)
    assert "Shop's change" in json.dumps(summary) and "Default's change" not in json.dumps(summary)
    _, summary = call("GET", "/api/releases/v3.0.0/summary", API_KEY)
    assert "Default's change" in json.dumps(summary)
    _, verdict = call("GET", "/api/releases/v3.0.0/verdict?service=shop", API_KEY)
    assert verdict["url"].endswith("/services/shop/releases/v3.0.0/")


@pytest.mark.parametrize(
    ("method", "path", "content_type", "data"),
    WRITES,
    ids=[w[1].rsplit("/", 1)[-1] for w in WRITES],
)
def test_every_ingestion_call_honours_the_service(
    shop_release: Release, method: str, path: str, content_type: str, data: bytes
) -> None:
    _, token = services.create_token("CI", None)
    status, body = call(method, path, token, data=data, content_type=content_type)
    assert status == 404 and "create it first" in body["error"], body
    status, body = call(method, f"{path}?service=shop", token, data=data, content_type=content_type)
    assert status != 404, body


def test_filing_a_report_honours_the_service(shop_release: Release) -> None:
    report = {"release_id": VERSION, "severity": "low", "findings": ["Nothing changed much"]}
    data = json.dumps(report)
    status, body = call(
        "POST", "/api/risk-reports", API_KEY, data=data, content_type="application/json"
    )
    assert status == 404 and f"No release {VERSION!r}" in body["error"]
    status, body = call(
        "POST",
        "/api/risk-reports?service=shop",
        API_KEY,
        data=data,
        content_type="application/json",
    )
    assert status in (201, 422) and body.get("error", "").find("No release") == -1, body


@pytest.mark.parametrize(("method", "path"), [READS[0], READS[2]])
def test_an_ingestion_token_is_told_what_it_is_for(
    shop_release: Release, method: str, path: str
) -> None:
    _, token = services.create_token("CI of shop", shop_release.service)
    status, body = call(method, f"{path}?service=shop", token)
    assert status == 403, body
    assert body["error"].startswith("An ingestion token (CI of shop) cannot read a release's")
    assert "/verdict" in body["error"] and "DETECTIVE_API_TOKEN" in body["error"]
    # What its doc says it reads: the verdict.
    status, body = call("GET", f"/api/releases/{VERSION}/verdict?service=shop", token)
    assert status == 200 and body["version"] == VERSION
    status, body = call(
        "POST", "/api/risk-reports?service=shop", token, data="{}", content_type="application/json"
    )
    assert status == 403 and "cannot file risk reports" in body["error"]


def test_the_api_key_and_a_run_token_cannot_ingest_and_say_why(shop_release: Release) -> None:
    path = "/api/releases?service=shop"
    data = json.dumps({"service": "shop", "version": VERSION})
    status, body = call("POST", path, API_KEY, data=data, content_type="application/json")
    assert status == 403 and body["error"].startswith("The site's API key cannot send")
    run = releases_services.start_assessment(shop_release, None)
    token = releases_services.issue_run_token(run.pk)
    status, body = call("POST", path, token, data=data, content_type="application/json")
    assert status == 403 and body["error"].startswith("A run's token cannot send")
    status, body = call("POST", path, "nonsense", data=data, content_type="application/json")
    assert status == 401 and "Authentication required" in body["error"]
    assert Conversation.objects.count() == 1
