"""The ingestion API over HTTP (Django's test client): tokens, the four endpoints, the OpenAPI
document, and hostile input that must be refused with nothing stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from releases.models import Release, Service
from sources import services
from sources.models import (
    Commit,
    CommitFile,
    Ingestion,
    IngestionToken,
    MetricSample,
    SourceKind,
    TestCase,
)

pytestmark = pytest.mark.django_db

ASSETS = Path(__file__).resolve().parents[1] / "tests" / "assets" / "junit"
SHA = "a" * 40


@pytest.fixture
def token() -> str:
    return services.create_token("ci", None)[1]


def post(
    client: Client, path: str, body: Any, token: str | None, content_type: str = "application/json"
) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body) if content_type == "application/json" else body
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = client.post(path, data=data, content_type=content_type, headers=headers)
    return response.status_code, response.json()


def test_a_token_is_stored_hashed_and_works_once_shown() -> None:
    stored, secret = services.create_token("ci", None)
    assert secret.startswith("dtk_") and secret not in stored.token_hash
    assert not IngestionToken.objects.filter(token_hash__contains=secret).exists()
    status, body = post(Client(), "/api/releases", {"version": "v1"}, secret)
    assert status == 201 and body["created"] is True
    stored.refresh_from_db()
    assert stored.last_used_at is not None


@pytest.mark.parametrize("header", [None, "Bearer nope", "Basic abc"])
def test_without_a_valid_token_it_is_401(header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    response = Client().post(
        "/api/releases", data="{}", content_type="application/json", headers=headers
    )
    assert response.status_code == 401
    assert "Bearer" in response.json()["error"]
    assert not Release.objects.exists()


def test_a_revoked_token_is_refused() -> None:
    stored, secret = services.create_token("ci", None)
    stored.revoked = True
    stored.save()
    assert post(Client(), "/api/releases", {"version": "v1"}, secret)[0] == 401


def test_release_create_then_update_is_idempotent_by_service_and_version(token: str) -> None:
    client = Client()
    body = {
        "service": "Checkout",
        "version": "v2.1.0",
        "environment": "production",
        "git": {"from_ref": "v2.0.0", "to_ref": "v2.1.0", "head_sha": "3f2c1e9a7b"},
        "pipeline_url": "https://ci.example.com/runs/42",
        "deployed_at": "2026-11-20T10:00:00+00:00",
    }
    status, created = post(client, "/api/releases", body, token)
    assert status == 201
    assert created["url"].endswith("/services/checkout/releases/v2.1.0/")
    status, updated = post(client, "/api/releases", body, token)
    assert status == 200 and updated["created"] is False
    release = Release.objects.get()
    assert (release.git_from_ref, release.head_sha, release.environment) == (
        "v2.0.0",
        "3f2c1e9a7b",
        "production",
    )
    # The release page answers at its readable address.
    assert Client().get(created["url"]).status_code in (200, 302)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"version": "v1/2"}, "version"),
        ({"version": "v1", "pipeline_url": "not a url"}, "pipeline_url"),
        ({"version": "v1", "deployed_at": "yesterday"}, "deployed_at"),
        ({"version": "v1", "git": {"head_sha": "xyz"}}, "head_sha"),
    ],
)
def test_an_invalid_release_is_422_and_says_why(
    token: str, body: dict[str, Any], expected: str
) -> None:
    status, answer = post(Client(), "/api/releases", body, token)
    assert status == 422
    assert expected in answer["error"]
    assert not Release.objects.exists()


def test_commits_junit_and_metrics_fill_the_summary(token: str) -> None:
    client = Client()
    post(client, "/api/releases", {"version": "v3"}, token)
    commit = {
        "sha": SHA,
        "author_name": "Ada",
        "author_email": "ada@example.com",
        "authored_at": "2026-11-20T09:00:00+01:00",
        "message": "fix(auth): expire sessions\n\nBREAKING CHANGE: all log out",
        "files": [{"path": "auth.py", "old_path": None, "added": 4, "deleted": 1}],
        "parents": ["b" * 40],
    }
    status, answer = post(client, "/api/releases/v3/commits", {"commits": [commit]}, token)
    assert status == 201 and answer["counts"]["commits"] == 1
    assert answer["summary"]["changes"] == [f"fix(auth): expire sessions ({SHA[:7]})"]
    assert Commit.objects.get().breaking is True

    xml = (ASSETS / "jest-junit.xml").read_bytes()
    path = "/api/releases/v3/junit?filename=jest.xml"
    status, answer = post(client, path, xml, token, "application/xml")
    assert status == 201
    assert answer["summary"]["tests"]["failed"] == 1
    status, again = post(client, path, xml, token, "application/xml")
    assert status == 200 and again["created"] is False
    assert TestCase.objects.count() == 5

    metrics = "# TYPE detective_error_rate gauge\ndetective_error_rate 0.05\n"
    status, answer = post(
        client, "/api/releases/v3/metrics?window=release", metrics, token, "text/plain"
    )
    assert status == 201
    assert answer["summary"]["deployment_metrics"]["error_rate"] == pytest.approx(0.05)
    kinds = sorted(Ingestion.objects.values_list("kind", "origin"))
    assert kinds == [
        ("commits", "api"),
        ("junit", "api"),
        ("metrics", "api"),
        ("release", "api"),
    ]


def test_an_unknown_release_or_service_is_404(token: str) -> None:
    client = Client()
    status, answer = post(client, "/api/releases/v404/commits", {"commits": []}, token)
    assert status == 404 and "No release 'v404'" in answer["error"]
    status, answer = post(
        client, "/api/releases/v1/junit?service=nowhere", b"<testsuite/>", token, "application/xml"
    )
    assert status == 404 and "No service 'nowhere'" in answer["error"]


# ---- hostile input: a clear 4xx and nothing stored ---------------------------------------------


@pytest.fixture
def release(token: str) -> Release:
    post(Client(), "/api/releases", {"version": "v1", "service": "checkout"}, token)
    return Release.objects.get()


BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<testsuite name="&lol3;"><testcase name="x"/></testsuite>"""
EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<testsuite><testcase name="&x;"/></testsuite>"""
MALFORMED = b'<testsuite>\n<testcase name="a">\n</testsuite>'


@pytest.mark.parametrize(
    ("xml", "status", "expected"),
    [
        (BOMB, 400, "bad.xml: refused"),
        (EXTERNAL, 400, "bad.xml: refused"),
        (MALFORMED, 400, "bad.xml, line 3: malformed XML"),
    ],
    ids=["billion-laughs", "external-entity", "malformed"],
)
def test_hostile_junit_is_refused_and_nothing_is_stored(
    token: str, release: Release, xml: bytes, status: int, expected: str
) -> None:
    path = "/api/releases/v1/junit?service=checkout&filename=bad.xml"
    code, answer = post(Client(), path, xml, token, "application/xml")
    assert code == status
    assert expected in answer["error"]
    assert not TestCase.objects.exists()
    assert not Ingestion.objects.filter(kind="junit").exists()


def test_a_body_over_the_limit_is_413_before_it_is_read(
    token: str, release: Release, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sources.parsers import junit

    monkeypatch.setattr(junit, "MAX_BYTES", 1000)
    xml = b"<testsuite>" + b'<testcase name="t"/>' * 200 + b"</testsuite>"
    code, answer = post(
        Client(), "/api/releases/v1/junit?service=checkout", xml, token, "application/xml"
    )
    assert code == 413 and "larger than 1,000 bytes" in answer["error"]
    assert not TestCase.objects.exists()


def test_metrics_that_are_not_openmetrics_are_refused_with_the_line(
    token: str, release: Release
) -> None:
    text = "# TYPE x gauge\nx 1\nx{broken 2\n"
    code, answer = post(
        Client(),
        "/api/releases/v1/metrics?service=checkout&filename=m.txt",
        text,
        token,
        "text/plain",
    )
    assert code == 400 and "m.txt, line 3" in answer["error"]
    assert not MetricSample.objects.exists()


def test_a_token_for_another_service_is_403_and_stores_nothing(release: Release) -> None:
    search = Service.objects.create(name="Search", slug="search")
    _, secret = services.create_token("search ci", search)
    client = Client()
    code, answer = post(client, "/api/releases", {"version": "v9", "service": "checkout"}, secret)
    assert code == 403 and "Search only" in answer["error"]
    xml = (ASSETS / "jest-junit.xml").read_bytes()
    code, _ = post(
        client, "/api/releases/v1/junit?service=checkout", xml, secret, "application/xml"
    )
    assert code == 403
    assert Release.objects.count() == 1
    assert not TestCase.objects.exists()
    assert Ingestion.objects.filter(kind="junit").count() == 0


def test_invalid_commits_are_422_with_the_field(token: str, release: Release) -> None:
    commit = {
        "sha": SHA,
        "author_name": "A",
        "author_email": "a@x",
        "authored_at": "2026-11-20T09:00:00",  # no offset
        "message": "m",
        "files": [],
        "parents": [],
    }
    code, answer = post(
        Client(), "/api/releases/v1/commits?service=checkout", {"commits": [commit]}, token
    )
    assert code == 422 and "authored_at" in answer["error"]
    assert not Commit.objects.exists()


def test_the_file_flags_are_stored_and_an_older_clients_files_have_none(
    token: str, release: Release
) -> None:
    commit = {
        "sha": SHA,
        "author_name": "A",
        "author_email": "a@x",
        "authored_at": "2026-11-20T09:00:00+00:00",
        "message": "Update to Unicode 16",
        "files": [
            {"path": "idna/uts46data.py", "old_path": None, "added": 9, "deleted": 8,
             "generated": True},
            {"path": "api/v1.py", "old_path": None, "added": 0, "deleted": 3, "removed": True},
            {"path": "idna/core.py", "old_path": None, "added": 2, "deleted": 1},
        ],
        "parents": [],
    }  # fmt: skip
    path = "/api/releases/v1/commits?service=checkout"
    code, _ = post(Client(), path, {"commits": [commit]}, token)
    assert code == 201
    stored = {f.path: (f.generated, f.vendored, f.removed) for f in CommitFile.objects.all()}
    assert stored == {
        "idna/uts46data.py": (True, False, False),
        "api/v1.py": (False, False, True),
        "idna/core.py": (False, False, False),
    }


def test_a_flag_that_is_not_a_boolean_is_422(token: str, release: Release) -> None:
    commit = {
        "sha": SHA,
        "author_name": "A",
        "author_email": "a@x",
        "authored_at": "2026-11-20T09:00:00+00:00",
        "message": "m",
        "files": [{"path": "a.py", "old_path": None, "added": 1, "deleted": 0,
                   "generated": "maybe"}],
        "parents": [],
    }  # fmt: skip
    path = "/api/releases/v1/commits?service=checkout"
    code, answer = post(Client(), path, {"commits": [commit]}, token)
    assert code == 422 and "generated" in answer["error"]
    assert not Commit.objects.exists()


def test_the_openapi_document_describes_the_endpoints() -> None:
    # For tools: no browser login, no token (the document holds no data).
    reader = Client()
    response = reader.get("/api/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert {
        "/api/releases",
        "/api/releases/{version}/commits",
        "/api/releases/{version}/junit",
        "/api/releases/{version}/metrics",
    } <= set(document["paths"])
    junit = document["paths"]["/api/releases/{version}/junit"]["post"]
    assert "application/xml" in junit["requestBody"]["content"]
    docs = reader.get("/api/docs")
    assert docs.status_code == 200 and b"openapi.json" in docs.content


# ---- metrics: hostile values and windows said plainly (issue 28, items 2 and 9) ------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# TYPE detective_error_rate gauge\ndetective_error_rate 1.5\n", "error rate is a"),
        ("# TYPE detective_error_rate gauge\ndetective_error_rate -0.5\n", "error rate is a"),
        (
            "# TYPE detective_response_time_p95_ms gauge\ndetective_response_time_p95_ms -3\n",
            "negative",
        ),
    ],
    ids=["error-rate-above-1", "error-rate-below-0", "negative-p95"],
)
def test_a_figure_its_key_cannot_hold_is_422_and_stores_nothing(
    token: str, release: Release, text: str, problem: str
) -> None:
    code, answer = post(
        Client(), "/api/releases/v1/metrics?service=checkout", text, token, "text/plain"
    )
    assert code == 422 and problem in answer["error"]
    assert not MetricSample.objects.exists()
    assert not Ingestion.objects.filter(kind=SourceKind.METRICS).exists()


@pytest.mark.parametrize("deployed", ["0001-01-01T00:10:00Z", "9999-12-31T23:50:00Z"])
def test_a_deploy_time_at_the_calendars_ends_with_metrics_is_422(token: str, deployed: str) -> None:
    client = Client()
    body = {"version": "v1", "service": "checkout", "deployed_at": deployed}
    # Refused where it enters (issue 37): no release stands with a time no window can hold.
    code, answer = post(client, "/api/releases", body, token)
    assert code == 422 and "deployed_at: Value error, out of range" in answer["error"]
    assert not Release.objects.filter(version="v1").exists()
    assert not MetricSample.objects.exists()


def test_metrics_without_a_deploy_time_are_answered_with_a_note(
    token: str, release: Release
) -> None:
    text = "# TYPE detective_error_rate gauge\ndetective_error_rate 0.01 1795460400000\n"
    code, answer = post(
        Client(), "/api/releases/v1/metrics?service=checkout", text, token, "text/plain"
    )
    assert code == 201
    assert answer["counts"]["note"].startswith("The release has no deploy time")
    assert "not judged against a baseline" in answer["counts"]["note"]


@pytest.mark.parametrize(
    ("service", "version", "said"),
    [
        ("x" * 500, "v1", "is longer than 100 characters (500)"),
        ("-shop", "v1", 'cannot start with "-"'),
        ("..", "v1", "cannot be '..'"),
        ("Shop", "..", "version"),
        ("Shop", ".", "version"),
        ("Shop", "-rf", "version"),
        ("Shop", "v" * 65, "version"),
    ],
)
def test_names_and_versions_are_checked_before_the_database(
    token: str, service: str, version: str, said: str
) -> None:
    status, body = post(Client(), "/api/releases", {"service": service, "version": version}, token)
    assert status in (400, 422), body
    assert said in body.get("error", "") or said in json.dumps(body)
    assert not Release.objects.exists()
    assert not Service.objects.exclude(slug="default").exists()


def test_several_reports_one_call_each_are_all_kept(token: str, release: Release) -> None:
    client = Client()
    surefire = (ASSETS / "TEST-com.example.checkout.PaymentServiceTest.xml").read_bytes()
    jest = (ASSETS / "jest-junit.xml").read_bytes()
    for name, xml in (("unit.xml", surefire), ("e2e.xml", jest)):
        code, answer = post(
            client,
            f"/api/releases/v1/junit?service=checkout&filename={name}",
            xml,
            token,
            "application/xml",
        )
        assert code == 201
    tests = answer["summary"]["tests"]
    assert (tests["passed"], tests["failed"], tests["skipped"]) == (5, 3, 2)
    assert Ingestion.objects.filter(kind="junit").count() == 2
