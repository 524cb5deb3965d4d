"""The release API's reads: who may call them, the summary and the verdict (filing a report,
the same callers' other call, is tested in assessments/report_api_test.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from assessments import filing, tasks
from assessments import services as run_services
from releases.models import Conversation, Release, RiskReport, RunStatus

pytestmark = pytest.mark.django_db

API_KEY = "k" * 40
REPORT = {
    "release_id": "v2.1.0",
    "severity": "high",
    "findings": ["error_rate 0.01 (1%), 0 failed tests"],
}


@pytest.fixture
def release(make_release: Callable[..., Release]) -> Release:
    make_release("v9.0.0")
    return make_release("v2.1.0", title="Payments")


@pytest.fixture
def running(release: Release) -> tuple[Conversation, str]:
    run = run_services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    run_services.mark_running(run.pk)
    return run, run_services.issue_run_token(run.pk)


def get(client: Client, path: str, token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get(path, headers=headers)


def post(client: Client, body: Any, token: str | None = None, raw: bytes | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = raw if raw is not None else json.dumps(body)
    return client.post("/api/risk-reports", data, content_type="application/json", headers=headers)


def test_the_summary_with_the_run_token(client: Client, running: tuple[Conversation, str]) -> None:
    _, token = running
    response = get(client, "/api/releases/v2.1.0/summary", token)
    assert response.status_code == 200
    assert response.json()["title"] == "Payments"
    assert response.json()["tests"]["failed"] == 0


@pytest.mark.parametrize("header", ["", "Bearer", "Basic abc", "Bearer nope"])
def test_without_a_valid_token_the_api_says_401(
    client: Client, running: tuple[Conversation, str], header: str
) -> None:
    headers = {"Authorization": header} if header else {}
    response = client.get("/api/releases/v2.1.0/summary", headers=headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "error" in response.json()


def test_a_browser_session_is_not_enough(
    admin_client: Client, running: tuple[Conversation, str]
) -> None:
    assert admin_client.get("/api/releases/v2.1.0/summary").status_code == 401
    assert post(admin_client, REPORT).status_code == 401


def test_a_token_expires_with_its_run(client: Client, running: tuple[Conversation, str]) -> None:
    run, token = running
    run_services.finish_run(run.pk, status=RunStatus.SUCCEEDED)
    assert get(client, "/api/releases/v2.1.0/summary", token).status_code == 401


def test_a_run_token_is_for_its_release_alone(
    client: Client, running: tuple[Conversation, str]
) -> None:
    _, token = running
    assert get(client, "/api/releases/v9.0.0/summary", token).status_code == 403
    response = post(client, {**REPORT, "release_id": "v9.0.0"}, token)
    assert response.status_code == 403
    assert "v2.1.0 only" in response.json()["error"]
    assert not RiskReport.objects.exists()


def test_the_api_key_reaches_every_release(client: Client, release: Release, settings: Any) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    assert get(client, "/api/releases/v9.0.0/summary", API_KEY).status_code == 200
    missing = get(client, "/api/releases/v0.0.0/summary", API_KEY)
    assert missing.status_code == 404
    assert missing.json() == {"error": "No release 'v0.0.0'."}
    assert get(client, "/api/releases/v9.0.0/summary", "k" * 39).status_code == 401


@pytest.mark.parametrize("version", ["v1%2F2", "%3Cscript%3E", "v" * 65])
def test_a_summary_for_a_malformed_version_is_404(
    client: Client, release: Release, settings: Any, version: str
) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    response = get(client, f"/api/releases/{version}/summary", API_KEY)
    assert response.status_code == 404


# -- the policy's signals in the summary ----------------------------------------------------------

RISKY = {
    # A change in payments backs the failing payment test (risk/policy.py: never its name alone).
    "changes": ["Retry payment capture on timeouts"],
    "test_results": {
        "passed": 90,
        "failed": 12,
        "skipped": 0,
        "failing_tests": ["test_payment_capture", *[f"test_ui_{i}" for i in range(11)]],
    },
    "deployment_metrics": {"error_rate": 0.09, "response_time_p95": 400},
}


@pytest.fixture
def risky_run(make_release: Callable[..., Release]) -> tuple[Conversation, str]:
    release = make_release("v6.6.6", **RISKY)
    run = run_services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    run_services.mark_running(run.pk)
    return run, run_services.issue_run_token(run.pk)


LOW = {"release_id": "v6.6.6", "severity": "low", "findings": ["error_rate 0.09"]}


def test_the_summary_carries_the_policys_signals_beside_the_data(
    client: Client, risky_run: tuple[Conversation, str]
) -> None:
    body = get(client, "/api/releases/v6.6.6/summary", risky_run[1]).json()
    assert body["tests"]["failed"] == 12  # the data as it is
    policy = body["policy"]
    assert (policy["version"], policy["severity_floor"]) == (1, "high")
    error_rate = next(s for s in policy["signals"] if s["detail"].startswith("Error rate"))
    assert (error_rate["level"], error_rate["figure"]) == ("high", 0.09)
    assert "high above 5 %" in error_rate["threshold"]


def test_the_brief_view_has_the_evidence_without_the_signals(
    client: Client, risky_run: tuple[Conversation, str]
) -> None:
    full = get(client, "/api/releases/v6.6.6/summary", risky_run[1]).json()
    brief = get(client, "/api/releases/v6.6.6/summary?view=brief", risky_run[1]).json()
    assert brief["version"] == full["version"]
    assert "tests" not in brief
    evidence = full["policy"]["evidence"]
    assert brief["policy"] == {
        "version": 1,
        "severity_floor": "high",
        "evidence": {f"E{n}": line for n, line in enumerate(evidence[:5], start=1)},
    }
    assert any(line.startswith("Error rate 9 %") for line in brief["policy"]["evidence"].values())


# -- the verdict ----------------------------------------------------------------------------


def test_the_verdict_with_the_api_key_and_a_run_token(
    client: Client, release: Release, running: tuple[Conversation, str], settings: Any
) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    report = filing.file_risk_report(release=release, severity="medium", findings=["x"])
    response = get(client, "/api/releases/v2.1.0/verdict", API_KEY)
    assert response.status_code == 200
    data = response.json()
    assert (data["version"], data["state"], data["report_id"]) == ("v2.1.0", "running", report.pk)
    assert data["severity"] == "medium" and data["url"] == "http://testserver/releases/v2.1.0/"
    _, token = running
    assert get(client, "/api/releases/v2.1.0/verdict", token).status_code == 200
    # A run's token reads its own release only.
    assert get(client, "/api/releases/v9.0.0/verdict", token).status_code == 403


def test_the_verdict_of_an_unknown_release_is_a_404_in_json(
    client: Client, release: Release, settings: Any
) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    response = get(client, "/api/releases/v404.0.0/verdict", API_KEY)
    assert response.status_code == 404 and "v404.0.0" in response.json()["error"]


def test_the_verdict_in_the_browser_needs_the_view_permission(
    client: Client, release: Release
) -> None:
    assert get(client, "/api/releases/v2.1.0/verdict").status_code == 401
    user = User.objects.create_user("reader", password="pw")
    client.force_login(user)
    assert get(client, "/api/releases/v2.1.0/verdict").status_code == 401
    from django.contrib.auth.models import Permission

    user.user_permissions.add(Permission.objects.get(codename="view_release"))
    client.force_login(User.objects.get(pk=user.pk))
    response = get(client, "/api/releases/v2.1.0/verdict")
    assert response.status_code == 200 and response.json()["state"] == "not_assessed"
