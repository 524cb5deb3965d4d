"""A receiver that drips its answer cannot hold up assessments: with one real task worker (as
`up` runs it), a webhook delivery to a receiver that sends one byte a second for a minute is
cut at the delivery's deadline (DETECTIVE_WEBHOOK_TIMEOUT, 10 s by default, 3 s here: what is
tested is the cut, not the length of the default), and an assessment queued behind it starts
within that deadline and the worker's poll (docs/using/configuration.md)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django_tasks_db.models import DBTaskResult

from assessments import services as releases_services
from assessments import tasks as releases_tasks
from releases.models import Conversation, Release
from tests.live_site import LiveSite
from tests.llm_server import ScriptedLLM
from webhooks import tasks as webhook_tasks
from webhooks.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db(transaction=True)
DEADLINE_S = 3.0  # DETECTIVE_WEBHOOK_TIMEOUT for the site (10 by default)
# The worker polls for the next task every second; the rest is a busy 2-core machine.
BOUND_S = DEADLINE_S + 5.0


@pytest.fixture
def drip() -> Iterator[tuple[str, list[float]]]:
    """A receiver on loopback that answers one byte a second for a minute; the times at which
    its connections ended (the client hanging up)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    stop = threading.Event()
    ended: list[float] = []

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    for _ in range(60):
                        conn.sendall(b"H")
                        if stop.wait(1.0):
                            break
                except OSError:
                    pass
                ended.append(time.monotonic())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/hook", ended
    finally:
        stop.set()
        thread.join(5)
        server.close()


def wait_until(check: Callable[[], bool], timeout: float, site: LiveSite, what: str) -> float:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{site.log_text()}")
        time.sleep(0.05)
    return time.monotonic()


def test_a_dripping_receiver_does_not_hold_up_an_assessment(
    tmp_path: Path,
    make_release: Callable[..., Release],
    drip: tuple[str, list[float]],
    settings: Any,
) -> None:
    url, ended = drip
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    release = make_release(version="9.9.0")
    hook = WebhookEndpoint.objects.create(name="drip", url=url, secret="whsec-0123456789abcdef")
    allowed = {
        "DETECTIVE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32",
        "DETECTIVE_WEBHOOK_TIMEOUT": f"{DEADLINE_S:g}",
    }
    with (
        ScriptedLLM() as llm,
        LiveSite(tmp_path / "logs", {**llm.environment(), **allowed}) as site,
    ):
        webhook_tasks.queue_ping(hook)
        delivery = DBTaskResult.objects.filter(task_path="webhooks.tasks.deliver")
        # The only worker is now held by the receiver.
        wait_until(lambda: delivery.filter(status="RUNNING").exists(), 30, site, "the delivery")
        queued_at = time.monotonic()
        run = releases_services.start_assessment(
            release, None, enqueue=releases_tasks.enqueue_assessment
        )
        started_at = wait_until(
            lambda: Conversation.objects.filter(pk=run.pk, started_at__isnull=False).exists(),
            60,
            site,
            "the assessment to start",
        )
        waited = started_at - queued_at
        print(f"the assessment queued behind the dripping delivery waited {waited:.1f} s")
        assert waited <= BOUND_S, site.log_text()
        [attempt] = WebhookDelivery.objects.all()
        assert attempt.error == f"no answer within {DEADLINE_S:g} s"
        assert attempt.response_excerpt == ""
        assert DEADLINE_S * 1000 <= attempt.duration_ms < (DEADLINE_S + 2) * 1000
        # The worker hung up on the receiver long before its minute was over.
        wait_until(lambda: bool(ended), 10, site, "the receiver to see the hang-up")
        assert ended[0] - queued_at < BOUND_S
