"""`POST /api/releases/<version>/waiting`: a CI job says it waits for a person's decision; the
report is stamped once, and the review page shows a pipeline waits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from assessments import filing
from releases.models import Release, RiskReport
from releases.stored_verdict import refresh_stored_verdict
from review.views_test import reviewer_client

pytestmark = pytest.mark.django_db
API_KEY = "k" * 40


def waiting(client: Client, version: str, token: str = API_KEY, **query: str) -> Any:
    return client.post(
        f"/api/releases/{version}/waiting",
        query_params=query,
        headers={"Authorization": f"Bearer {token}"},
    )


@pytest.fixture
def needs_person(make_release: Callable[..., Release]) -> RiskReport:
    release = make_release("v2.0.0")
    report = filing.file_risk_report(release=release, severity="low", findings=["ok"])
    RiskReport.objects.filter(pk=report.pk).update(
        needs_review=True, review_reasons=["the model and the policy disagree"]
    )
    # A bare update() skips the stored verdict's hooks: refresh it as the services do.
    refresh_stored_verdict(release)
    return report


def test_a_waiting_pipeline_is_stamped_once_and_shown_on_the_review_page(
    client: Client, needs_person: RiskReport, settings: Any, django_user_model: type[User]
) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    first = waiting(client, "v2.0.0")
    assert first.status_code == 200, first.content
    body = first.json()
    assert body["state"] == "needs_person"
    assert body["review_url"] == f"http://testserver/review/#queue-item-{needs_person.pk}"
    needs_person.refresh_from_db()
    assert needs_person.pipeline_waiting_since is not None
    assert body["waiting_since"] == needs_person.pipeline_waiting_since.isoformat()
    # A re-run job does not make the wait look newer.
    assert waiting(client, "v2.0.0").json()["waiting_since"] == body["waiting_since"]

    page = reviewer_client(django_user_model).get("/review/")
    html = page.content.decode()
    assert "Pipeline waiting" in html
    assert "a pipeline waits for this decision since" in html


def test_a_report_that_needs_no_person_is_left_alone(
    client: Client, make_release: Callable[..., Release], settings: Any
) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    release = make_release("v3.0.0")
    report = filing.file_risk_report(release=release, severity="low", findings=["ok"])
    answer = waiting(client, "v3.0.0")
    assert answer.status_code == 200
    assert answer.json()["waiting_since"] is None
    report.refresh_from_db()
    assert report.pipeline_waiting_since is None


def test_refusals(client: Client, needs_person: RiskReport, settings: Any) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    assert waiting(client, "v2.0.0", token="x" * 40).status_code == 401
    assert client.post("/api/releases/v2.0.0/waiting").status_code == 401
    missing = waiting(client, "v9.9.9")
    assert missing.status_code == 404 and missing.json() == {"error": "No release 'v9.9.9'."}
    assert client.get("/api/releases/v2.0.0/waiting").status_code in (401, 405)
    needs_person.refresh_from_db()
    assert needs_person.pipeline_waiting_since is None
