"""`POST /api/releases/<version>/assess`: a CI job starts the assessment of the release it sent,
with its ingestion token; the worker does it (queued here, not run)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django_tasks_db.models import DBTaskResult

from assessments import filing
from releases.models import Conversation, Release, RunStatus, Service
from sources import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop_release(make_release: Callable[..., Release]) -> Release:
    made = make_release("v3.0.0")
    made.service = Service.objects.create(name="Shop", slug="shop")
    made.save()
    return made


def assess(client: Client, token: str, path: str) -> tuple[int, dict[str, str]]:
    response = client.post(path, headers={"Authorization": f"Bearer {token}"})
    return response.status_code, response.json()


def test_assess_queues_one_run_for_the_worker(
    client: Client, shop_release: Release, django_capture_on_commit_callbacks: Any
) -> None:
    _, token = services.create_token("CI of shop", shop_release.service)
    with django_capture_on_commit_callbacks(execute=True):
        status, body = assess(client, token, "/api/releases/v3.0.0/assess?service=shop")
    assert status == 202
    run = Conversation.objects.get(release=shop_release)
    assert (body["run"], body["status"]) == (str(run.pk), RunStatus.QUEUED)
    assert body["url"] == f"http://testserver/runs/{run.pk}/"
    assert DBTaskResult.objects.filter(task_path="assessments.tasks.assess_release").count() == 1
    # Asked again while it waits: the same run, nothing queued twice.
    status, again = assess(client, token, "/api/releases/v3.0.0/assess?service=shop")
    assert (status, again["run"]) == (202, body["run"])
    assert Conversation.objects.filter(release=shop_release).count() == 1


def test_assess_is_refused_for_another_service_or_an_unknown_release(
    client: Client, shop_release: Release
) -> None:
    _, other = services.create_token("CI of billing", Service.objects.create(name="Billing"))
    status, body = assess(client, other, "/api/releases/v3.0.0/assess?service=shop")
    assert status == 403 and "Billing" in body["error"]
    _, token = services.create_token("CI", None)
    status, body = assess(client, token, "/api/releases/v9.9.9/assess?service=shop")
    assert status == 404
    assert not Conversation.objects.exists()


def test_a_rerun_job_keeps_the_decision_and_force_assesses_again(
    client: Client, shop_release: Release, django_capture_on_commit_callbacks: Any
) -> None:
    from django.contrib.auth.models import User

    from review import services as review_services

    _, token = services.create_token("CI of shop", shop_release.service)
    path = "/api/releases/v3.0.0/assess?service=shop"
    with django_capture_on_commit_callbacks(execute=True):
        status, body = assess(client, token, path)
    run = Conversation.objects.get(pk=body["run"])
    assert run.metadata["asked_by"] == "token CI of shop"
    Conversation.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    report = filing.file_risk_report(
        release=shop_release, severity="high", findings=["Errors tripled"], conversation=run
    )
    manager = User.objects.create_user("rm", password="pw-123456789")
    review_services.decide_report(report, manager, decision="accept")

    # The job is re-run on the same data: the decision stands, nothing is queued.
    status, kept = assess(client, token, path)
    assert (status, kept["run"], kept["kept"]) == (200, str(run.pk), True)
    assert "decided by rm (accepted as high)" in kept["message"]
    assert Conversation.objects.filter(release=shop_release).count() == 1

    # On purpose: a new run, recorded as forced by this token.
    with django_capture_on_commit_callbacks(execute=True):
        status, forced = assess(client, token, path + "&force=true")
    assert (status, forced["kept"], forced["status"]) == (202, False, RunStatus.QUEUED)
    again = Conversation.objects.get(pk=forced["run"])
    assert again.metadata["forced"] is True
    assert again.metadata["asked_by"] == "token CI of shop"
