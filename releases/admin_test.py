"""The record cannot be rewritten in the admin: reports, runs, events and decisions are shown,
never changed, added or deleted there (a correction is a new decision on the review desk)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.test import Client

from assessments import filing
from assessments import services as run_services
from releases.models import AgentEvent, Conversation, Release, ReviewDecision, RiskReport
from review import services as review_services

pytestmark = pytest.mark.django_db


@pytest.fixture
def record(make_release: Callable[..., Release]) -> dict[str, object]:
    release = make_release(
        "v2.0.0",
        test_results={"passed": 9, "failed": 3, "skipped": 0, "failing_tests": ["test_pay"]},
        deployment_metrics={"error_rate": 0.09, "response_time_p95": 300},
    )
    run = run_services.start_assessment(release, None)
    event = run_services.append_event(run, kind="run_started", payload={"kind": "run_started"})
    report = filing.file_risk_report(
        release=release, severity="low", findings=["Fine"], conversation=run
    )
    RiskReport.objects.filter(pk=report.pk).update(needs_review=True)
    report.refresh_from_db()
    decision = review_services.decide_report(report, None, decision="accept")
    return {
        "riskreport": report,
        "conversation": run,
        "agentevent": event,
        "reviewdecision": decision,
    }


@pytest.mark.parametrize("model", ["riskreport", "conversation", "agentevent", "reviewdecision"])
def test_the_record_is_read_only_and_cannot_be_deleted(
    admin_client: Client, record: dict[str, object], model: str
) -> None:
    obj = record[model]
    url = f"/admin/releases/{model}/{obj.pk}/"  # type: ignore[attr-defined]
    page = admin_client.get(url + "change/")
    assert page.status_code == 200
    assert b'type="submit"' not in page.content or b'name="_save"' not in page.content
    assert admin_client.get(url + "delete/").status_code == 403
    assert admin_client.post(url + "delete/", {"post": "yes"}).status_code == 403
    assert admin_client.get(f"/admin/releases/{model}/add/").status_code == 403
    # No bulk delete either.
    listing = admin_client.get(f"/admin/releases/{model}/").content
    assert b'value="delete_selected"' not in listing


def test_a_posted_change_to_a_report_changes_nothing(
    admin_client: Client, record: dict[str, object]
) -> None:
    report = record["riskreport"]
    assert isinstance(report, RiskReport)
    response = admin_client.post(
        f"/admin/releases/riskreport/{report.pk}/change/",
        {"severity": "high", "summary": "rewritten", "needs_review": ""},
    )
    assert response.status_code == 403
    report.refresh_from_db()
    assert (report.severity, report.summary, report.needs_review) == ("low", "", True)
    assert RiskReport.objects.count() == 1 and ReviewDecision.objects.count() == 1
    assert Conversation.objects.count() == 1 and AgentEvent.objects.count() == 1


def test_the_report_list_shows_the_severity_that_counts_beside_the_model_and_the_policy(
    admin_client: Client, make_release: Callable[..., Release]
) -> None:
    release = make_release(
        "v3.0.0",
        test_results={"passed": 9, "failed": 3, "skipped": 0, "failing_tests": ["test_pay"]},
        deployment_metrics={"error_rate": 0.09, "response_time_p95": 300},
    )
    report = filing.file_risk_report(release=release, severity="low", findings=["Fine"])
    RiskReport.objects.filter(pk=report.pk).update(needs_review=True)
    listing = admin_client.get("/admin/releases/riskreport/").content.decode()
    # The report waits for review with model low, policy high: it counts as high.
    cells = {
        name: re.search(rf'<td class="field-{name}">(.*?)</td>', listing, re.S)
        for name in ("counts_badge", "severity_badge", "policy_badge")
    }
    assert all(cells.values()), listing[:500]
    assert ">high<" in cells["counts_badge"].group(1)  # type: ignore[union-attr]
    assert ">low<" in cells["severity_badge"].group(1)  # type: ignore[union-attr]
    assert ">high<" in cells["policy_badge"].group(1)  # type: ignore[union-attr]
    releases = admin_client.get("/admin/releases/release/").content.decode()
    assert "model low, policy high" in releases
