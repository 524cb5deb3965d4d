"""`POST /api/risk-reports`: what a filing validates, what it refuses, and the policy's check
of it (refused once, then kept for review)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from assessments import services as run_services
from assessments import tasks
from releases.models import Conversation, Release, RiskReport
from sources.release_api_test import API_KEY, LOW, REPORT, RISKY, post

pytestmark = pytest.mark.django_db


def _running(release: Release) -> tuple[Conversation, str]:
    run = run_services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    run_services.mark_running(run.pk)
    return run, run_services.issue_run_token(run.pk)


@pytest.fixture
def running(make_release: Callable[..., Release]) -> tuple[Conversation, str]:
    make_release("v9.0.0")
    return _running(make_release("v2.1.0", title="Payments"))


@pytest.fixture
def risky_run(make_release: Callable[..., Release]) -> tuple[Conversation, str]:
    return _running(make_release("v6.6.6", **RISKY))


def test_filing_a_report_links_it_to_the_run(
    client: Client, running: tuple[Conversation, str]
) -> None:
    run, token = running
    response = post(client, {**REPORT, "summary": " Risky. "}, token)
    assert response.status_code == 201
    body = response.json()
    report = RiskReport.objects.get(pk=body["report_id"])
    assert (report.conversation, report.severity, report.summary) == (run, "high", "Risky.")
    # The finding carries the policy's error rate and failed tests, not its p95: the report
    # keeps that sentence too, marked as the policy's (issue 30).
    assert report.model_findings == REPORT["findings"]
    assert body["policy_findings"] == report.policy_findings
    assert report.policy_findings and all("p95" in s for s in report.policy_findings)
    assert body["findings"] == [*REPORT["findings"], *report.policy_findings]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({**REPORT, "severity": "critical"}, "severity: Input should be 'high', 'medium' or 'low'"),
        ({**REPORT, "findings": []}, "findings: List should have at least 1 item"),
        (
            {**REPORT, "findings": ["ok", " "]},
            "findings.1: String should have at least 1 character",
        ),
        ({"severity": "low", "findings": ["x"]}, "release_id is required"),
        ({**REPORT, "colour": "red"}, "colour is not a field of a risk report"),
        ([1, 2], "the body must be a JSON object"),
    ],
)
def test_an_invalid_report_gets_a_400_that_says_what_is_wrong(
    client: Client, running: tuple[Conversation, str], body: Any, message: str
) -> None:
    response = post(client, body, running[1])
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert not RiskReport.objects.exists()


def test_a_body_that_is_not_json(client: Client, running: tuple[Conversation, str]) -> None:
    response = post(client, None, running[1], raw=b"{nope")
    assert (response.status_code, response.json()["error"]) == (
        400,
        "Invalid body: the body is not valid JSON.",
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "larger than"),
        (b'{"a":' * 30 + b"1" + b"}" * 30, "nested deeper than 20 levels"),
        (
            b'{"release_id": "v2.1.0", "severity": "low", "severity": "high", "findings": ["x"]}',
            "'severity' appears more than once",
        ),
        (
            b'{"release_id": "v2.1.0", "severity": "low", "findings": ["x"], '
            b'"summary": "a\\u0000b"}',
            "summary contains a NUL character",
        ),
        (
            b'{"release_id": "v2.1.0", "severity": "low", "findings": ["x\\ud800"]}',
            "findings[0] contains a lone surrogate",
        ),
        (b'{"release_id": "v2.1.0\\u0000", "severity": "low", "findings": ["x"]}', "NUL"),
        (b"\xff\xfe", "not UTF-8"),
        (b"", "empty"),
        (b'{"release_id": NaN}', "NaN is not a JSON value"),
    ],
)
def test_a_hostile_body_gets_a_400_and_nothing_is_stored(
    client: Client, running: tuple[Conversation, str], raw: bytes, message: str
) -> None:
    response = post(client, None, running[1], raw=raw)
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert not RiskReport.objects.exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"findings": ["x"] * 51}, "findings: List should have at most 50 items"),
        ({"findings": ["x" * 1001]}, "findings.0: String should have at most 1000 characters"),
        ({"summary": "s" * 4001}, "summary: String should have at most 4000 characters"),
        ({"release_id": "v1/2"}, "release_id is not a release version"),
        ({"release_id": "<script>"}, "release_id is not a release version"),
        ({"release_id": "v" * 65}, "release_id: String should have at most 64 characters"),
    ],
)
def test_findings_summary_and_version_have_limits(
    client: Client, running: tuple[Conversation, str], change: dict[str, Any], message: str
) -> None:
    response = post(client, {**REPORT, **change}, running[1])
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_the_limits_themselves_are_accepted(
    client: Client, running: tuple[Conversation, str]
) -> None:
    # Fifty different findings: a repeated one has no content of its own (issue 40).
    findings = ["f" * (1000 - n) + "g" * n for n in range(50)]
    body = {**REPORT, "findings": findings, "summary": "s" * 4000}
    assert post(client, body, running[1]).status_code == 201


def test_the_api_needs_no_csrf_token(running: tuple[Conversation, str], admin_user: User) -> None:
    client = Client(enforce_csrf_checks=True)
    assert post(client, REPORT, running[1]).status_code == 201


def test_a_filing_below_the_policy_is_refused_once_then_kept_for_review(
    client: Client, risky_run: tuple[Conversation, str]
) -> None:
    _, token = risky_run
    first = post(client, LOW, token)
    assert first.status_code == 422
    assert "severity low is below the policy's high" in first.json()["error"]
    assert "Error rate 9 %" in first.json()["error"]  # which signal, which figure
    assert not RiskReport.objects.exists()

    second = post(client, LOW, token)
    assert second.status_code == 201
    report = RiskReport.objects.get()
    assert (report.severity, report.policy_severity, report.needs_review) == ("low", "high", True)
    assert report.policy is not None and report.policy.version == 1
    assert any("below the policy's high" in reason for reason in report.review_reasons)
    assert {s["name"] for s in report.signals} >= {"error_rate", "critical_area_failures"}
    assert second.json()["needs_review"] is True


def test_a_corrected_filing_after_a_refusal_is_accepted(
    client: Client, risky_run: tuple[Conversation, str]
) -> None:
    _, token = risky_run
    assert post(client, LOW, token).status_code == 422
    fixed = {
        **LOW,
        "severity": "high",
        "findings": ["error_rate 0.09 (9%) is above 5%", "12 failed tests, one in payments"],
    }
    response = post(client, fixed, token)
    assert response.status_code == 201, response.json()
    report = RiskReport.objects.get()
    assert (report.severity, report.needs_review, report.review_reasons) == ("high", False, [])
    assert all(part["grounded"] for part in report.grounding)


def test_an_ungrounded_finding_is_refused_with_its_text_quoted(
    client: Client, running: tuple[Conversation, str]
) -> None:
    _, token = running
    invented = {**REPORT, "findings": ["2 payment tests failing"]}
    response = post(client, invented, token)
    assert response.status_code == 422
    error = response.json()["error"]
    assert "'2 payment tests failing'" in error
    assert "0 failed tests" in error
    kept = post(client, invented, token)
    assert kept.status_code == 201
    report = RiskReport.objects.get()
    assert report.needs_review
    assert report.grounding[0]["grounded"] is False


def test_a_severity_above_the_policy_is_accepted_and_noted(
    client: Client, running: tuple[Conversation, str]
) -> None:
    response = post(client, REPORT, running[1])
    assert response.status_code == 201
    report = RiskReport.objects.get()
    assert (report.severity, report.policy_severity, report.needs_review) == ("high", "low", False)
    assert report.notes == [
        "The model saw more risk than the policy: it filed high, the policy gives low."
    ]


def test_a_caller_without_a_run_gets_no_second_chance_to_be_remembered(
    client: Client, make_release: Callable[..., Release], settings: Any
) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    make_release("v6.6.6", **RISKY)
    response = post(client, LOW, API_KEY)
    assert response.status_code == 201
    assert RiskReport.objects.get().needs_review
