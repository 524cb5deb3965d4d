"""The site answering its own API in-process, through Django's WSGI handler on threads."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.test import override_settings

from assessments import services, tasks
from assessments.runner.in_process import (
    InProcessTransport,
    in_process_api,
    in_process_url,
    site_wsgi_application,
)
from releases.models import Release, RiskReport


def test_the_in_process_url_is_one_the_site_answers() -> None:
    with override_settings(DEBUG=True, ALLOWED_HOSTS=[], SECURE_SSL_REDIRECT=False):
        assert in_process_url() == "http://127.0.0.1"
    with override_settings(DEBUG=False, ALLOWED_HOSTS=["localhost"], SECURE_SSL_REDIRECT=False):
        assert in_process_url() == "http://localhost"
    # Production: a real host name, and https (http would be redirected).
    production = {"DEBUG": False, "SECURE_SSL_REDIRECT": True}
    with override_settings(ALLOWED_HOSTS=[".detective.example.com"], **production):
        assert in_process_url() == "https://detective.example.com"
    with override_settings(ALLOWED_HOSTS=["*"], **production):
        assert in_process_url() == "https://127.0.0.1"


# The answering threads use connections of their own: the data must be committed.
committed = pytest.mark.django_db(transaction=True)


def _assessment(make_release: Callable[..., Release]) -> str:
    release = make_release("v2.1.0", title="Payments")
    run = services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    services.mark_running(run.pk)
    return services.issue_run_token(run.pk)


@committed
async def test_requests_and_their_bodies_reach_the_site_and_answers_come_back(
    make_release: Callable[..., Release],
) -> None:
    token = await sync_to_async(_assessment)(make_release)
    client, api_url = in_process_api(threads=2)
    headers = {"Authorization": f"Bearer {token}"}
    async with client:
        summary, anonymous, filed = await asyncio.gather(
            client.get(f"{api_url}/api/releases/v2.1.0/summary", headers=headers),
            client.get(f"{api_url}/api/releases/v2.1.0/summary"),
            client.post(
                f"{api_url}/api/risk-reports",
                headers=headers,
                json={"release_id": "v2.1.0", "severity": "low", "findings": ["docs only"]},
            ),
        )
    assert summary.status_code == 200 and summary.json()["title"] == "Payments"
    assert anonymous.status_code == 401
    assert filed.status_code == 201
    report = await sync_to_async(RiskReport.objects.get)()
    assert (report.severity, report.model_findings) == ("low", ["docs only"])


@committed
async def test_a_thread_keeps_its_connection_across_requests_until_the_transport_closes(
    make_release: Callable[..., Release],
) -> None:
    token = await sync_to_async(_assessment)(make_release)
    opened: list[BaseDatabaseWrapper] = []

    def note(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
        if threading.current_thread().name.startswith("site-api"):
            opened.append(connection)

    connection_created.connect(note, weak=False)
    try:
        transport = InProcessTransport(site_wsgi_application(), threads=1)
        api_url = in_process_url()
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(transport=transport) as client:
            for _ in range(3):
                answer = await client.get(f"{api_url}/api/releases/v2.1.0/summary", headers=headers)
                assert answer.status_code == 200
            assert len(opened) == 1  # not one per request
            assert opened[0].connection is not None
        assert opened[0].connection is None  # closed with the transport
    finally:
        connection_created.disconnect(note)
