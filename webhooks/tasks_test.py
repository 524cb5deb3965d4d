"""Webhooks end to end in one process: a filed or decided verdict queues a delivery task per
endpoint that wants it; the task POSTs the signed verdict to a real HTTP receiver, logs each
attempt, and queues the next with its back-off (a 500 then a 200, a timeout, giving up)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from assessments import filing
from assessments import services as run_services
from releases.models import Release, Service
from releases.selectors import release_verdict
from review import services as review_services
from tests.webhook_receiver import Receiver
from webhooks import tasks
from webhooks.models import Event, WebhookDelivery, WebhookEndpoint
from webhooks.signing import HEADER, verify

SECRET = "whsec-0123456789abcdef"
pytestmark = pytest.mark.django_db


@pytest.fixture
def release(make_release: Callable[..., Release]) -> Release:
    shop = Service.objects.create(name="Shop", slug="shop")
    made = make_release(version="1.4.0")
    made.service = shop
    made.save()
    return made


def endpoint(url: str, **fields: Any) -> WebhookEndpoint:
    fields.setdefault("name", "chat")
    return WebhookEndpoint.objects.create(url=url, secret=SECRET, **fields)


def queued() -> list[DBTaskResult]:
    return list(
        DBTaskResult.objects.filter(task_path="webhooks.tasks.deliver").order_by("enqueued_at")
    )


def run_queued(result: DBTaskResult) -> str:
    """Run a queued attempt as the worker would (its task, its arguments), in this process."""
    return result.task.call(*result.args_kwargs["args"], **result.args_kwargs["kwargs"])


def file_report(release: Release, capture: Any, severity: str = "high") -> None:
    with capture(execute=True):
        filing.file_risk_report(
            release=release, severity=severity, findings=["Checkout errors tripled"], summary="Bad"
        )


def test_filing_a_verdict_queues_one_delivery_per_endpoint_that_wants_it(
    release: Release, receiver: Receiver, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    settings.DETECTIVE_API_URL = "http://detective.example/"
    every = endpoint(receiver.url, name="every service")
    shop = endpoint(receiver.url, name="shop only", service="Shop")
    endpoint(receiver.url, name="another service", service="billing")
    endpoint(receiver.url, name="switched off", active=False)
    file_report(release, django_capture_on_commit_callbacks)
    tasks_queued = queued()
    assert sorted(t.args_kwargs["args"][0] for t in tasks_queued) == sorted([every.pk, shop.pk])
    # Queued only: nothing was sent while the report was filed.
    assert receiver.received == []
    args = tasks_queued[0].args_kwargs["args"]
    assert args[2:5] == [Event.FILED, "shop", "1.4.0"]
    assert (args[5], args[7]) == ("", release.pk)  # the body is made when it is sent
    assert run_queued(tasks_queued[0]) == "delivered"
    body = json.loads(receiver.received[0].body)
    assert body == {
        **release_verdict(release).as_json(),
        "event": "verdict.filed",
        "service": "shop",
        "release_path": release.get_absolute_url(),
        "url": f"http://detective.example{release.get_absolute_url()}",
    }
    assert "shop" in body["release_path"]
    assert (body["state"], body["severity"]) == ("assessed", "high")
    assert body["findings"][0]["text"] == "Checkout errors tripled"


def test_a_filed_verdict_waits_for_its_run_to_end(
    release: Release, receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    from assessments import tasks as releases_tasks
    from releases.models import RunStatus

    endpoint(receiver.url)
    run = run_services.start_assessment(release, None, enqueue=releases_tasks.enqueue_assessment)
    run_services.mark_running(run.pk)
    file_report(release, django_capture_on_commit_callbacks)
    [first] = queued()
    assert "its run has not ended" in run_queued(first)
    assert receiver.received == []
    [_, again] = queued()
    assert again.args_kwargs["args"][8] == 3
    assert timezone.now() < again.run_after < timezone.now() + timedelta(seconds=4)
    assert run_services.finish_run(run.pk, status=RunStatus.SUCCEEDED)
    assert run_queued(again) == "delivered"
    assert json.loads(receiver.received[0].body)["state"] == "assessed"


def test_deciding_a_verdict_queues_a_decided_event(
    release: Release, receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    file_report(release, django_capture_on_commit_callbacks)
    endpoint(receiver.url)
    report = release.risk_reports.get()
    person = User.objects.create_user("rm", password="x")
    with django_capture_on_commit_callbacks(execute=True):
        review_services.decide_report(
            report, person, decision="override", severity="low", reason="a known flaky test"
        )
    [task] = queued()
    assert run_queued(task) == "delivered"
    body = json.loads(receiver.received[0].body)
    assert body["event"] == "verdict.decided"
    assert body["state"] == "decided"
    assert body["severity"] == "low"
    assert body["decision"]["reason"] == "a known flaky test"


def test_a_delivery_is_signed_and_logged(
    release: Release,
    receiver: Receiver,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    endpoint(receiver.url)
    file_report(release, django_capture_on_commit_callbacks)
    [task] = queued()
    with caplog.at_level(logging.DEBUG):
        assert run_queued(task) == "delivered"
    [got] = receiver.received
    assert got.path == "/hooks/detective"
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["Detective-Event"] == "verdict.filed"
    assert got.headers["Detective-Attempt"] == "1"
    verify(got.headers[HEADER], SECRET, got.body)
    assert json.loads(got.body)["version"] == "1.4.0"
    [logged] = WebhookDelivery.objects.all()
    assert (logged.attempt, logged.status_code, logged.succeeded, logged.error) == (
        1,
        200,
        True,
        "",
    )
    assert str(logged.delivery_id) == got.headers["Detective-Delivery"]
    assert logged.next_attempt_at is None
    assert "attempt 1, delivered" in caplog.text
    assert SECRET not in caplog.text
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("webhooks"))
    assert "delivered" in ours and receiver.url not in ours


def test_a_500_is_retried_with_back_off_and_the_200_ends_it(
    release: Release, receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    receiver.script = [(500, 0.0), (200, 0.0)]
    endpoint(receiver.url)
    file_report(release, django_capture_on_commit_callbacks)
    [first] = queued()
    before = timezone.now()
    assert "attempt 1 failed (answered 500 Internal Server Error); attempt 2 queued" in run_queued(
        first
    )
    [_, second] = queued()
    # The second attempt waits its back-off (10 s by default) before a worker takes it.
    assert before + timedelta(seconds=9) < second.run_after < timezone.now() + timedelta(seconds=11)
    assert second.args_kwargs["args"][6] == 2
    assert run_queued(second) == "delivered"
    attempts = list(WebhookDelivery.objects.order_by("attempt"))
    assert [(a.attempt, a.status_code, a.succeeded) for a in attempts] == [
        (1, 500, False),
        (2, 200, True),
    ]
    assert attempts[0].response_excerpt == "receiver says no"
    assert attempts[0].delivery_id == attempts[1].delivery_id
    # Each attempt is signed anew, and both verify.
    first_got, second_got = receiver.received
    assert first_got.body == second_got.body
    assert second_got.headers["Detective-Attempt"] == "2"
    for got in receiver.received:
        verify(got.headers[HEADER], SECRET, got.body)
    assert len(queued()) == 2


def test_a_receiver_that_does_not_answer_in_time_is_logged_and_retried(
    release: Release,
    receiver: Receiver,
    django_capture_on_commit_callbacks: Any,
    settings: Any,
) -> None:
    settings.WEBHOOK_TIMEOUT_S = 0.3
    receiver.script = [(200, 2.0)]
    endpoint(receiver.url)
    file_report(release, django_capture_on_commit_callbacks)
    [first] = queued()
    assert "no answer within 0.3 s" in run_queued(first)
    [logged] = WebhookDelivery.objects.all()
    assert (logged.status_code, logged.succeeded, logged.error) == (
        None,
        False,
        "no answer within 0.3 s",
    )
    assert 250 <= logged.duration_ms < 2000
    assert len(queued()) == 2


def test_the_attempts_are_bounded(
    release: Release,
    receiver: Receiver,
    django_capture_on_commit_callbacks: Any,
    settings: Any,
) -> None:
    settings.WEBHOOK_RETRY_DELAYS_S = (0, 0)
    receiver.script = [(503, 0.0)]
    endpoint(receiver.url)
    file_report(release, django_capture_on_commit_callbacks)
    outcomes = []
    while len(outcomes) < 10 and (
        pending := [t for t in queued() if t.args_kwargs["args"][6] > len(outcomes)]
    ):
        outcomes.append(run_queued(pending[0]))
    assert len(outcomes) == 3
    assert outcomes[-1] == "gave up after attempt 3: answered 503 Service Unavailable"
    assert WebhookDelivery.objects.count() == 3
    assert not WebhookDelivery.objects.filter(attempt=3).exclude(next_attempt_at=None).exists()


def test_an_endpoint_switched_off_before_its_turn_gets_nothing(
    release: Release, receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    hook = endpoint(receiver.url)
    file_report(release, django_capture_on_commit_callbacks)
    WebhookEndpoint.objects.filter(pk=hook.pk).update(active=False)
    [task] = queued()
    assert run_queued(task) == "endpoint gone or inactive: not sent"
    assert receiver.received == []


def test_a_failing_webhook_never_fails_the_filing(
    release: Release,
    receiver: Receiver,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    endpoint(receiver.url)

    def broken(*_: Any) -> None:
        raise RuntimeError("the task queue is down")

    monkeypatch.setattr(tasks.services, "endpoints_for", broken)
    file_report(release, django_capture_on_commit_callbacks)
    assert release.risk_reports.count() == 1
    assert "a receiver of a releases signal failed" in caplog.text
