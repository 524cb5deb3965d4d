"""Suspects ranked from stored rows (`rank_stored`): a release whose commits came with their hunks
and the head's facts through the API, in whichever order its commits and its failures arrive;
old clients; bad input refused with nothing stored."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client

from sources import services
from sources.models import Commit, CommitFile, ReleaseHead, TestCase
from sources.services import commits as commits_service
from sources.services.suspects import _newest_first, rank_stored

pytestmark = pytest.mark.django_db

CULPRIT, DOCS, BASE = "c" * 40, "d" * 40, "b" * 40
QUERY = "?service=shop"


def commit(sha: str, parent: str, when: int, message: str, path: str, hunks: Any) -> dict:
    file: dict[str, Any] = {"path": path, "old_path": None, "added": 1, "deleted": 1}
    if hunks is not None:
        file["hunks"] = hunks
    return {
        "sha": sha,
        "author_name": "Ada Lovelace",
        "author_email": "ada@example.com",
        "authored_at": datetime(2026, 11, when, tzinfo=UTC).isoformat(),
        "message": message,
        "files": [file],
        "parents": [parent],
    }


def commits_body(*, hunks: bool = True, head: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "commits": [
            commit(
                DOCS, CULPRIT, 21, "docs: say more", "README.md",
                [[1, 1, 1, 2]] if hunks else None,
            ),
            commit(
                CULPRIT, BASE, 20, "Add a second of grace", "payments/timed.py",
                [[2, 1, 2, 1]] if hunks else None,
            ),
        ]
    }  # fmt: skip
    if head:
        body["head"] = {
            "sha": DOCS,
            "tests": {"tests/test_timed.py": ["payments.timed", "payments.timed.max_age_ok"]},
            "blame": {"payments/timed.py": [[2, 2, CULPRIT]], "README.md": [[1, 2, DOCS]]},
            "scopes": {"payments/timed.py": [[1, 4, ["def:max_age_ok", "return", "False"]]]},
        }
    return body


REPORT = b"""<?xml version="1.0"?>
<testsuite name="pytest" tests="2" failures="1">
<testcase classname="tests.test_timed" name="test_max_age">
<failure message="assert True is False&#10; +  where True = max_age_ok(11, 10)">def test_max_age():
&gt;       assert max_age_ok(11, 10) is False
E       assert True is False

/home/runner/work/shop/shop/tests/test_timed.py:5: AssertionError</failure></testcase>
<testcase classname="tests.test_timed" name="test_young"/>
</testsuite>"""


@pytest.fixture
def api() -> tuple[Client, dict[str, str]]:
    token = services.create_token("ci", None)[1]
    client, headers = Client(), {"Authorization": f"Bearer {token}"}
    created = client.post(
        "/api/releases",
        json.dumps({"version": "1.1.0", "service": "shop"}),
        content_type="application/json",
        headers=headers,
    )
    assert created.status_code == 201, created.content
    return client, headers


def send_commits(api: tuple[Client, dict[str, str]], body: dict[str, Any]) -> Any:
    client, headers = api
    return client.post(
        f"/api/releases/1.1.0/commits{QUERY}",
        json.dumps(body),
        content_type="application/json",
        headers=headers,
    )


def send_junit(api: tuple[Client, dict[str, str]], xml: bytes = REPORT) -> Any:
    client, headers = api
    return client.post(
        f"/api/releases/1.1.0/junit{QUERY}&filename=unit.xml",
        xml,
        content_type="application/xml",
        headers=headers,
    )


def first_suspect() -> str | None:
    case = TestCase.objects.get(name="test_max_age")
    ranked = (case.suspects or {}).get("ranked") or [{}]
    return ranked[0].get("sha")


def test_commits_then_the_report(api: tuple[Client, dict[str, str]]) -> None:
    sent = send_commits(api, commits_body())
    assert sent.status_code == 201, sent.content
    assert sent.json()["counts"]["files_with_hunks"] == 2
    assert "failures_with_suspects" not in sent.json()["counts"]  # no failure yet
    reported = send_junit(api)
    assert reported.status_code == 201, reported.content
    assert reported.json()["counts"]["failures_with_suspects"] == 1
    case = TestCase.objects.get(name="test_max_age")
    [top] = case.suspects["ranked"]  # the docs commit changed nothing the test exercises
    assert (top["sha"], top["tier"], top["path"]) == (
        CULPRIT,
        "code under test",
        "payments/timed.py",
    )
    assert "its change is in `max_age_ok`, which test_max_age calls" in top["reason"]
    assert case.suspects["lines"] == {CULPRIT: [["payments/timed.py", 2, 2, False]]}
    assert TestCase.objects.get(name="test_young").suspects is None


def test_the_report_then_commits(api: tuple[Client, dict[str, str]]) -> None:
    assert send_junit(api).status_code == 201
    assert TestCase.objects.get(name="test_max_age").suspects is None
    sent = send_commits(api, commits_body())
    assert sent.json()["counts"]["failures_with_suspects"] == 1
    assert first_suspect() == CULPRIT
    # The same commits again: stored once, ranked the same.
    again = send_commits(api, commits_body())
    assert again.status_code == 200 and first_suspect() == CULPRIT
    assert CommitFile.objects.count() == 2


def test_an_older_clients_commits_rank_nothing_until_hunks_come(
    api: tuple[Client, dict[str, str]],
) -> None:
    assert send_commits(api, commits_body(hunks=False, head=False)).status_code == 201
    assert send_junit(api).status_code == 201
    assert TestCase.objects.get(name="test_max_age").suspects is None
    assert rank_stored(TestCase.objects.get(name="test_max_age").release) is None
    # A newer client sends the same range with its hunks: the stored files get them.
    sent = send_commits(api, commits_body())
    assert sent.status_code == 201, sent.content
    assert sent.json()["counts"]["files_with_hunks"] == 2
    assert first_suspect() == CULPRIT


def test_without_the_heads_facts_the_test_file_is_unknown_and_nothing_is_suspected(
    api: tuple[Client, dict[str, str]],
) -> None:
    # Hunks alone: the test file is no path the range changed, so no import reaches timed.py.
    send_commits(api, commits_body(head=False))
    send_junit(api)
    assert TestCase.objects.get(name="test_max_age").suspects["ranked"] == []


@pytest.mark.parametrize(
    ("change", "status", "said"),
    [
        (lambda b: b["head"].update(sha="HEAD"), 422, "head.sha"),
        (lambda b: b["head"]["blame"].update({"a.py": [[5, 1, CULPRIT]]}), 422, "start <= end"),
        (lambda b: b["commits"][0]["files"][0].update(hunks=[[1, 2]]), 422, "hunks[0]"),
        (
            lambda b: b["commits"][0]["files"][0].update(hunks=[[1, -2, 1, 1]]),
            422,
            "hunks.0.1: Input should be greater than or equal to 0",
        ),
    ],
)
def test_bad_hunks_or_head_are_4xx_and_store_nothing(
    api: tuple[Client, dict[str, str]], change: Any, status: int, said: str
) -> None:
    body = commits_body()
    change(body)
    sent = send_commits(api, body)
    assert sent.status_code == status, sent.content
    assert said in json.dumps(sent.json())
    assert not Commit.objects.exists() and not ReleaseHead.objects.exists()


def test_past_the_hunk_bound_is_413_and_stores_nothing(
    api: tuple[Client, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commits_service, "MAX_HUNKS", 1)
    sent = send_commits(api, commits_body())
    assert sent.status_code == 413 and "at most 1 per release" in sent.json()["error"]
    assert not Commit.objects.exists() and not ReleaseHead.objects.exists()


def test_a_bundle_with_a_bad_head_stores_nothing_at_all() -> None:
    token = services.create_token("ci", None)[1]
    body = commits_body()
    body["head"]["tests"] = ["not", "an", "object"]
    answer = Client().post(
        "/api/releases/bundle",
        {
            "release": json.dumps({"version": "2.0.0", "service": "shop"}),
            "commits": json.dumps(body),
        },
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 422, answer.content
    assert answer.json()["stored"] == "nothing"
    assert not Commit.objects.exists() and not ReleaseHead.objects.exists()


def _row(sha: str, day: int, *parents: str) -> Any:
    return SimpleNamespace(
        sha=sha, parents=list(parents), authored_at=datetime(2026, 11, day, tzinfo=UTC)
    )


def test_children_come_before_their_parents_whatever_the_dates() -> None:
    # A branch commit dated after main's later commit, merged at the end.
    merge, branch, main, base = _row("m", 3, "x", "b"), _row("b", 9, "o"), _row("x", 2, "o"), "o"
    assert [c.sha for c in _newest_first([main, branch, merge])] == ["m", "b", "x"]
    early = _row("e", 1, base)
    late = _row("l", 5, "e")
    assert [c.sha for c in _newest_first([early, late])] == ["l", "e"]
