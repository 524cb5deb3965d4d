"""The endpoints' admin keeps the secret a secret; the deliveries' admin is read-only."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from webhooks.models import Event, WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db
SECRET = "whsec-the-real-secret-9f3a"


def form(**changes: str) -> dict[str, Any]:
    data = {
        "name": "chat",
        "url": "https://hooks.example.com/detective",
        "secret": SECRET,
        "service": "",
        "active": "on",
        "deliveries-TOTAL_FORMS": "0",
        "deliveries-INITIAL_FORMS": "0",
    }
    data.update(changes)
    return data


def test_an_endpoint_is_added_and_its_secret_never_shown_back(admin_client: Client) -> None:
    response = admin_client.post(reverse("admin:webhooks_webhookendpoint_add"), form())
    assert response.status_code == 302, response.content.decode()[:2000]
    hook = WebhookEndpoint.objects.get()
    assert hook.secret == SECRET
    change = admin_client.get(reverse("admin:webhooks_webhookendpoint_change", args=[hook.pk]))
    listing = admin_client.get(reverse("admin:webhooks_webhookendpoint_changelist"))
    for page in (change, listing):
        assert page.status_code == 200
        assert SECRET not in page.content.decode()
    assert "…9f3a" in change.content.decode()


def test_an_empty_secret_keeps_the_old_one_and_a_short_one_is_refused(admin_client: Client) -> None:
    hook = WebhookEndpoint.objects.create(name="chat", url="https://h.example/x", secret=SECRET)
    url = reverse("admin:webhooks_webhookendpoint_change", args=[hook.pk])
    assert admin_client.post(url, form(secret="", name="renamed")).status_code == 302
    hook.refresh_from_db()
    assert (hook.name, hook.secret) == ("renamed", SECRET)
    refused = admin_client.post(url, form(secret="short"))
    assert "Use at least 16 characters." in refused.content.decode()
    hook.refresh_from_db()
    assert hook.secret == SECRET


def test_a_new_endpoint_needs_a_secret(admin_client: Client) -> None:
    response = admin_client.post(reverse("admin:webhooks_webhookendpoint_add"), form(secret=""))
    assert "A new endpoint needs a secret." in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_deliveries_are_shown_and_cannot_be_added_or_changed(admin_client: Client) -> None:
    hook = WebhookEndpoint.objects.create(name="chat", url="https://h.example/x", secret=SECRET)
    delivery = WebhookDelivery.objects.create(
        endpoint=hook,
        event=Event.FILED,
        service="shop",
        version="1.4.0",
        attempt=2,
        status_code=500,
        error="answered 500 Internal Server Error",
        duration_ms=12,
    )
    listing = admin_client.get(reverse("admin:webhooks_webhookdelivery_changelist"))
    assert "answered 500 Internal Server Error" in listing.content.decode()
    assert admin_client.get(reverse("admin:webhooks_webhookdelivery_add")).status_code == 403
    change_url = reverse("admin:webhooks_webhookdelivery_change", args=[delivery.pk])
    page = admin_client.get(change_url)
    assert page.status_code == 200 and "1.4.0" in page.content.decode()
    admin_client.post(change_url, {"version": "9.9.9"})
    delivery.refresh_from_db()
    assert delivery.version == "1.4.0"
    endpoint_page = admin_client.get(
        reverse("admin:webhooks_webhookendpoint_change", args=[hook.pk])
    ).content.decode()
    assert "answered 500 Internal Server Error" in endpoint_page


def test_the_test_action_queues_a_signed_ping(admin_client: Client, receiver: Any) -> None:
    from django_tasks_db.models import DBTaskResult

    from webhooks.signing import HEADER, verify

    hook = WebhookEndpoint.objects.create(name="chat", url=receiver.url, secret=SECRET)
    response = admin_client.post(
        reverse("admin:webhooks_webhookendpoint_changelist"),
        {"action": "send_test", "_selected_action": [hook.pk]},
        follow=True,
    )
    assert "1 test deliveries queued" in response.content.decode()
    [queued] = DBTaskResult.objects.filter(task_path="webhooks.tasks.deliver")
    assert queued.task.call(*queued.args_kwargs["args"]) == "delivered"
    [got] = receiver.received
    assert got.headers["Detective-Event"] == "ping"
    verify(got.headers[HEADER], SECRET, got.body)
    assert WebhookDelivery.objects.get().event == Event.PING
