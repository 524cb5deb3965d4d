"""The drill-down endpoints over a service with history (tests/drilldown_data.py): who may
call them, what they answer, their pages and caps, and hostile release text kept as data."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from assessments import services, tasks
from releases.models import Conversation, Release
from sources.drilldown.paging import MAX_LIMIT
from tests import drilldown_data

pytestmark = pytest.mark.django_db

API_KEY = "k" * 40
BASE = f"/api/releases/{drilldown_data.TARGET}"


@pytest.fixture
def target(settings: Any) -> Release:
    settings.DETECTIVE_API_KEY = API_KEY
    return drilldown_data.build()


def run_token(release: Release) -> str:
    run = services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    services.mark_running(run.pk)
    return services.issue_run_token(run.pk)


def get(client: Client, path: str, token: str = API_KEY) -> Any:
    return client.get(path, headers={"Authorization": f"Bearer {token}"})


def as_key(path: str) -> str:
    return path + ("&" if "?" in path else "?") + "service=checkout"


PATHS = ["/tests", "/changes", "/metrics/response_time_p95/history"]


@pytest.mark.parametrize("path", PATHS)
def test_a_run_token_reads_its_own_release_and_no_other(
    client: Client, target: Release, path: str
) -> None:
    token = run_token(target)
    assert get(client, BASE + path, token).status_code == 200
    other = Release.objects.get(version="v1.3.0")
    response = get(client, f"/api/releases/{other.version}{path}", token)
    assert response.status_code == 403
    assert response.json() == {"error": "This token is for release v1.4.0 only."}
    # A token of another run does not read this one's release.
    assert get(client, BASE + path, run_token(other)).status_code == 403


@pytest.mark.parametrize("path", PATHS)
def test_without_a_valid_token_401_and_the_api_key_reads_by_service(
    client: Client, target: Release, path: str
) -> None:
    assert client.get(BASE + path).status_code == 401
    assert get(client, BASE + path, "nope").status_code == 401
    assert get(client, as_key(BASE + path)).status_code == 200
    # Without ?service= the API key means the default service, which has no v1.4.0.
    missing = get(client, BASE + path)
    assert missing.status_code == 404 and "error" in missing.json()


def test_a_post_is_a_json_405(client: Client, target: Release) -> None:
    response = client.post(BASE + "/tests", headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status_code == 405
    assert response["Content-Type"].startswith("application/json")


def test_an_eval_trial_reads_no_real_release(client: Client, target: Release) -> None:
    run = Conversation.objects.get(pk=services.start_assessment(target, None).pk)
    run.metadata = {"eval": {"release_id": target.version}}
    run.save()
    services.mark_running(run.pk)
    token = services.issue_run_token(run.pk)
    response = get(client, BASE + "/tests", token)
    assert response.status_code == 404
    assert "eval scenario" in response.json()["error"]


def test_the_summary_names_the_drill_downs_with_something_to_show(
    client: Client, target: Release
) -> None:
    summary = get(client, BASE + "/summary", run_token(target)).json()
    assert set(summary["drilldowns"]) == {
        "get_test_details",
        "get_code_changes",
        "get_metric_history",
    }


def test_failed_tests_with_their_history(client: Client, target: Release) -> None:
    body = get(client, as_key(BASE + "/tests?status=failed")).json()
    assert body["counts"] == {"failed": 2, "flaky": 0, "passed": 4, "skipped": 0}
    by_name = {test["name"]: test for test in body["tests"]}
    charge = by_name["test_charge_card"]
    assert charge["file"] == "tests/payments/test_payment.py"
    assert charge["failure_type"] == "AssertionError"
    assert len(charge["failure_message"]) == 500
    assert charge["failure_message_cut"] == "cut to 500 of 738 characters"
    # As the policy reads it (sources.history): a release where it failed, then passed on a
    # rerun, counts among those it failed in.
    assert charge["history"] == {
        "releases_looked_at": 4,
        "ran_in": 4,
        "failed_in_last_releases": 3,
        "failed_in": ["v1.3.0", "v1.2.0", "v1.1.0"],
        "flaky_in_last_releases": 1,
        "first_failed_in": "v1.1.0",
        "failed_before": True,
        "new_failure": False,
        "known_flaky": True,
    }
    refund = by_name["test_refund_is_recorded"]["history"]
    assert refund["new_failure"] and not refund["known_flaky"]
    assert refund["failed_in_last_releases"] == 0 and refund["ran_in"] == 4


def test_a_flaky_test_is_flaky_in_its_release(client: Client, target: Release) -> None:
    earlier = get(client, "/api/releases/v1.2.0/tests?status=flaky&service=checkout").json()
    assert [t["name"] for t in earlier["tests"]] == ["test_charge_card"]
    # Surefire's flakyFailure is an attempt that failed before the one that passed.
    flaky = earlier["tests"][0]
    assert (flaky["attempts"], flaky["failed_attempts"], flaky["status"]) == (2, 1, "flaky")
    # It passed on its rerun: the failure shown is the attempt's that failed.
    assert (flaky["failure_type"], flaky["failure_message"]) == ("TimeoutError", "timed out")


def test_tests_are_paged_and_the_limit_is_capped(client: Client, target: Release) -> None:
    first = get(client, as_key(BASE + "/tests?limit=2")).json()
    assert (first["total"], first["returned"], first["next_offset"]) == (6, 2, 2)
    # Failed tests come first.
    assert {t["status"] for t in first["tests"]} == {"failed"}
    last = get(client, as_key(BASE + "/tests?limit=2&offset=4")).json()
    assert last["returned"] == 2 and last["next_offset"] is None
    names = {t["name"] for t in first["tests"]} | {t["name"] for t in last["tests"]}
    assert len(names) == 4
    capped = get(client, as_key(BASE + "/tests?limit=100000")).json()
    assert capped["limit"] == MAX_LIMIT and capped["returned"] == 6


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("limit=ten", "limit must be a whole number"),
        ("limit=0", "limit must be at least 1"),
        ("offset=-1", "offset must be at least 0"),
        ("status=broken", "status must be one of failed, flaky, passed, skipped"),
        ("name_contains=" + "x" * 201, "name_contains is longer than 200 characters"),
    ],
)
def test_a_query_that_cannot_be_read_is_a_json_400(
    client: Client, target: Release, query: str, problem: str
) -> None:
    response = get(client, as_key(f"{BASE}/tests?{query}"))
    assert response.status_code == 400
    assert problem in response.json()["error"]


def test_hostile_test_names_come_back_as_data(client: Client, target: Release) -> None:
    body = get(client, as_key(BASE + "/tests?name_contains=im_start")).json()
    assert [t["name"] for t in body["tests"]] == [drilldown_data.HOSTILE_NAME]
    failed = get(client, as_key(BASE + "/tests?name_contains=refund")).json()["tests"]
    assert failed[0]["failure_message"] == drilldown_data.HOSTILE_MESSAGE


def test_code_changes_with_areas_totals_and_authors(client: Client, target: Release) -> None:
    body = get(client, as_key(BASE + "/changes")).json()
    assert body["critical_areas_touched"] == {"migrations": 1, "payments": 1}
    assert body["totals"]["release"] == {
        "commits": 3,
        "files": 4,
        "directories": 4,
        "lines_added": 303,
        "lines_deleted": 33,
    }
    ledger = body["commits"][0]
    assert ledger["subject"] == "feat(payments)!: record refunds in the ledger"
    assert (ledger["type"], ledger["scope"], ledger["breaking"]) == ("feat", "payments", True)
    assert ledger["critical_areas"] == ["migrations", "payments"]
    assert ledger["author_earlier_commits_in_service"] == 0
    assert body["commits"][1]["author_earlier_commits_in_service"] == 4
    assert [f["path"] for f in ledger["files"]] == [
        "src/payments/refunds.py",
        "db/migrations/0042_refund_ledger.py",
    ]


def test_code_changes_filtered_by_path_and_area(client: Client, target: Release) -> None:
    by_path = get(client, as_key(BASE + "/changes?path_prefix=db/")).json()
    assert by_path["total"] == 1
    assert [f["path"] for f in by_path["commits"][0]["files"]] == [
        "db/migrations/0042_refund_ledger.py"
    ]
    assert by_path["totals"]["kept"]["lines_added"] == 60
    by_area = get(client, as_key(BASE + "/changes?area=payments&limit=1")).json()
    assert by_area["total"] == 1 and by_area["next_offset"] is None
    unknown = get(client, as_key(BASE + "/changes?area=weather"))
    assert unknown.status_code == 400 and "area must be one of auth" in unknown.json()["error"]


def test_metric_history_judged_against_baseline_and_earlier_releases(
    client: Client, target: Release
) -> None:
    body = get(client, as_key(BASE + "/metrics/response_time_p95/history")).json()
    assert body["release_window"]["samples"] == 30 and body["baseline_window"]["samples"] == 30
    assert 850 < body["release_window"]["median"] < 950
    judged = body["judgement_against_baseline"]
    assert (judged["outcome"], judged["reason"]) == ("fail", "regressed")
    assert judged["sentence"].startswith("p95 latency rose from a median of 4")
    assert "above the 1.5 times allowed" in judged["sentence"]
    assert [e["release_id"] for e in body["earlier_releases"]] == [
        "v1.3.5",
        "v1.3.0",
        "v1.2.0",
        "v1.1.0",
    ]
    history = body["judgement_against_earlier_releases"]
    assert history["outcome"] == "fail" and history["pooled_from_releases"] == 4


def test_a_metric_without_samples_is_too_little_data(client: Client, target: Release) -> None:
    body = get(client, as_key(BASE + "/metrics/error_rate/history")).json()
    assert body["release_window"]["samples"] == 0
    assert body["judgement_against_baseline"]["outcome"] == "too_little_data"
    assert "cannot be judged" in body["judgement_against_baseline"]["sentence"]
    unknown = get(client, as_key(BASE + "/metrics/p95/history"))
    assert unknown.status_code == 404
    assert unknown.json()["error"] == (
        "Release v1.4.0 has no metric 'p95'; it has: error_rate, response_time_p95, "
        "detective_response_time_p95_ms."
    )
    stored = get(client, as_key(BASE + "/metrics/detective_response_time_p95_ms/history"))
    assert stored.json()["release_window"]["samples"] == 30
    bad = get(client, as_key(BASE + "/metrics/1%3Cscript%3E/history"))
    assert bad.status_code == 400 and "is not a metric name" in bad.json()["error"]


def test_a_failure_comes_with_its_traceback_head_and_tail(client: Client, target: Release) -> None:
    from sources.models import TestCase

    trace = "def test_max_age():\n" + "".join(f"  frame {i}\n" for i in range(600))
    trace += "tests/test_timed.py:107: Failed"
    TestCase.objects.filter(release=target, name="test_refund_is_recorded").update(traceback=trace)
    body = get(client, as_key(BASE + "/tests?status=failed")).json()
    refund = next(test for test in body["tests"] if test["name"] == "test_refund_is_recorded")
    assert refund["traceback"].startswith("def test_max_age():")
    assert refund["traceback"].endswith("tests/test_timed.py:107: Failed")
    assert "characters cut" in refund["traceback"]
    assert len(refund["traceback"]) < 1300
