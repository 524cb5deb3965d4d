"""The webhook tasks (django-tasks, run by `manage.py run_worker` like the assessments): one
delivery attempt per task, the next attempt queued with its back-off when one fails, so a
filing or a decision never waits on a receiver.

The body is the verdict as it stands when the first attempt is made (later attempts send the
same bytes). A report is filed by the run while it still runs, so a `verdict.filed` delivery
waits, a few seconds at a time, for the run to end (up to `RUN_WAIT_S`): the receiver gets the
verdict's final state, not "running".
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.utils import timezone
from django_tasks import task

from releases.models import Release
from releases.selectors import release_verdict
from webhooks import services
from webhooks.models import Event, WebhookEndpoint

RUN_POLL_S = 3
RUN_WAIT_S = 600


@task()
def deliver(
    endpoint_id: int,
    delivery_id: str,
    event: str,
    service: str,
    version: str,
    body: str,
    attempt: int = 1,
    release_id: int | None = None,
    waited_s: int = 0,
) -> str:
    """One attempt; returns what became of it (for the task's result in the admin). An empty
    body is made now from the release's verdict."""
    if not body:
        release = Release.objects.select_related("service").filter(pk=release_id).first()
        if release is None:
            return "the release is gone: not sent"
        running = release_verdict(release).state == "running"
        if event == Event.FILED and running and waited_s < RUN_WAIT_S:
            deliver.using(run_after=timezone.now() + timedelta(seconds=RUN_POLL_S)).enqueue(
                endpoint_id, delivery_id, event, service, version, "", 1, release_id,
                waited_s + RUN_POLL_S,
            )  # fmt: skip
            return "its run has not ended: asked again in a few seconds"
        body = services.event_body(release, event)
    record = services.attempt_delivery(
        endpoint_id=endpoint_id,
        delivery_id=delivery_id,
        event=event,
        service=service,
        version=version,
        body=body,
        attempt=attempt,
    )
    if record is None:
        return "endpoint gone or inactive: not sent"
    if record.next_attempt_at is not None:
        deliver.using(run_after=record.next_attempt_at).enqueue(
            endpoint_id, delivery_id, event, service, version, body, attempt + 1
        )
        return f"attempt {attempt} failed ({record.error}); attempt {attempt + 1} queued"
    return "delivered" if record.succeeded else f"gave up after attempt {attempt}: {record.error}"


def queue_ping(endpoint: WebhookEndpoint) -> str:
    """A test delivery to one endpoint (the admin's action): signed and logged like the rest."""
    delivery_id = services.new_delivery_id()
    body = json.dumps({"event": Event.PING, "endpoint": endpoint.name}, sort_keys=True)
    deliver.enqueue(endpoint.pk, delivery_id, Event.PING, endpoint.service or "-", "-", body, 1)
    return delivery_id


def queue_event(release: Release, event: str) -> list[str]:
    """Queue the event's delivery to every active endpoint that wants the release's service
    (the body is made when the first attempt is). The delivery ids, one per endpoint."""
    endpoints = services.endpoints_for(release)
    queued = []
    for endpoint in endpoints:
        delivery_id = services.new_delivery_id()
        deliver.enqueue(
            endpoint.pk, delivery_id, event, release.service.slug, release.version, "", 1,
            release.pk,
        )  # fmt: skip
        queued.append(delivery_id)
    return queued
