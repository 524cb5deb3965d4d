"""`POST /api/releases/bundle`: the release and its sources in one request, stored whole or
not at all."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from releases.models import Release, Service
from sources import services
from sources.models import Commit, Ingestion, MetricSample, TestCase

pytestmark = pytest.mark.django_db

SHA = "a" * 40
COMMIT = {
    "sha": SHA,
    "author_name": "Ada",
    "author_email": "ada@example.com",
    "authored_at": "2026-11-20T10:00:00+00:00",
    "message": "fix(pay): round refunds",
    "files": [{"path": "pay.py", "old_path": None, "added": 3, "deleted": 1}],
    "parents": [],
}
UNIT = (
    b'<testsuite name="u" tests="2"><testcase classname="a" name="t1"/>'
    b'<testcase classname="a" name="t2"><failure message="no"/></testcase></testsuite>'
)
METRICS = b"detective_error_rate 0.02\n# EOF\n"


def send(client: Client, token: str, *, junit: list[tuple[str, bytes]], **fields: Any) -> Any:
    data: dict[str, Any] = {
        name: json.dumps(value) for name, value in fields.items() if name != "metrics"
    }
    data["junit"] = [SimpleUploadedFile(name, body) for name, body in junit]
    if "metrics" in fields:
        data["metrics"] = SimpleUploadedFile("metrics.txt", fields["metrics"])
    return client.post(
        "/api/releases/bundle", data=data, headers={"Authorization": f"Bearer {token}"}
    )


def test_everything_is_stored_in_one_request(client: Client) -> None:
    token = services.create_token("ci", None)[1]
    answer = send(
        client, token,
        release={"service": "shop", "version": "1.4.0", "title": "Refunds"},
        commits={"commits": [COMMIT]},
        junit=[("unit.xml", UNIT)],
        metrics=METRICS,
    )  # fmt: skip
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (body["stored"], body["created"], body["version"]) == ("all", True, "1.4.0")
    assert [(p["kind"], p["name"], p["created"]) for p in body["parts"]] == [
        ("commits", "1 commits", True),
        ("junit", "unit.xml", True),
        ("metrics", "metrics.txt", True),
    ]
    release = Release.objects.get(version="1.4.0")
    assert release.title == "Refunds"
    assert Commit.objects.filter(release=release).count() == 1
    assert TestCase.objects.filter(release=release).count() == 2
    assert MetricSample.objects.filter(release=release).exists()
    # The same bundle again: the same rows, each part "already stored".
    again = send(client, token, release={"service": "shop", "version": "1.4.0"},
                 commits={"commits": [COMMIT]}, junit=[("unit.xml", UNIT)])  # fmt: skip
    assert again.status_code == 201
    assert [p["created"] for p in again.json()["parts"]] == [False, False]
    assert TestCase.objects.filter(release=release).count() == 2


@pytest.mark.parametrize(
    ("junit", "commits", "status", "says"),
    [
        ([("unit.xml", UNIT), ("bad.xml", b"<testsuite><oops")], [COMMIT], 400, "bad.xml"),
        ([("unit.xml", UNIT)], [{**COMMIT, "sha": "nope"}], 422, "Invalid commits"),
    ],
)
def test_a_refused_part_stores_nothing_at_all(
    client: Client, junit: list[tuple[str, bytes]], commits: list[Any], status: int, says: str
) -> None:
    token = services.create_token("ci", None)[1]
    answer = send(
        client, token, release={"service": "shop", "version": "1.4.0"},
        commits={"commits": commits}, junit=junit,
    )  # fmt: skip
    assert answer.status_code == status, answer.content
    body = answer.json()
    assert body["stored"] == "nothing"
    assert says in body["error"] and "Nothing of this ingestion was stored." in body["error"]
    assert not Release.objects.filter(version="1.4.0").exists()
    assert not Service.objects.filter(slug="shop").exists()
    assert not Ingestion.objects.exists() and not Commit.objects.exists()
    assert not TestCase.objects.exists()


def test_a_token_of_another_service_stores_nothing(client: Client) -> None:
    billing = Service.objects.create(name="Billing", slug="billing")
    token = services.create_token("billing ci", billing)[1]
    answer = send(client, token, release={"service": "shop", "version": "1.4.0"},
                  junit=[("unit.xml", UNIT)])  # fmt: skip
    assert answer.status_code == 403
    assert answer.json()["stored"] == "nothing"
    assert not Release.objects.filter(version="1.4.0").exists()


def test_without_a_token_or_a_release(client: Client) -> None:
    assert client.post("/api/releases/bundle").status_code == 401
    token = services.create_token("ci", None)[1]
    missing = send(client, token, junit=[])
    assert missing.status_code == 400
    assert "'release' is required" in missing.json()["error"]
    bad = send(client, token, release={"service": "shop", "version": "1.0 beta"}, junit=[])
    assert bad.status_code == 422
