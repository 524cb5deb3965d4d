"""The run page's websocket, through the site's whole ASGI stack and the configured layer."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from assessments import services, tasks
from assessments.fanout import GroupFanout
from assessments.fanout_test import BlinkingLayer
from assessments.layer_health import Outage
from detective_site.asgi import application
from releases.models import Conversation, Release

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True, scope="module")
def _close_thread_connections() -> Iterator[None]:
    """Sync code called from async code (the consumer, the API served in-process) runs on
    asgiref's one shared thread, whose connection would outlive the tests and keep
    PostgreSQL from dropping the test database."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


ORIGIN = (b"origin", b"http://localhost")
SEQ = re.compile(r'data-seq="(\d+)"')


def session_cookie(user: User) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def communicator(run: Conversation, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, f"/ws/runs/{run.pk}/", headers=list(headers))


@pytest.fixture
def run(make_release: Callable[..., Release]) -> Conversation:
    conversation = services.start_assessment(
        make_release("v5.0.0"), None, enqueue=tasks.enqueue_assessment
    )
    services.mark_running(conversation.pk)
    return conversation


def add_events(run: Conversation, count: int, text: str = "x") -> None:
    """Save, then publish, like the runner does."""
    for _ in range(count):
        payload = {"kind": "text_delta", "step": 1, "text": text}
        services.publish_event(services.append_event(run, kind="text_delta", payload=payload))


async def closed_with(socket: WebsocketCommunicator) -> int:
    connected, _ = await socket.connect()
    assert connected  # accepted, then closed with a code the page understands
    message = await socket.receive_output(timeout=5)
    assert message["type"] == "websocket.close"
    return int(message["code"])


async def test_anonymous_users_are_refused(run: Conversation) -> None:
    assert await closed_with(communicator(run, ORIGIN)) == 4401


async def test_users_who_may_not_see_runs_are_refused(
    run: Conversation, django_user_model: type[User]
) -> None:
    user = await database_sync_to_async(django_user_model.objects.create_user)("guest", "", "pw")
    cookie = await database_sync_to_async(session_cookie)(user)
    assert await closed_with(communicator(run, ORIGIN, (b"cookie", cookie))) == 4403


async def test_a_foreign_origin_is_refused(run: Conversation, admin_user: User) -> None:
    cookie = await database_sync_to_async(session_cookie)(admin_user)
    socket = communicator(run, (b"origin", b"http://evil.example"), (b"cookie", cookie))
    connected, _ = await socket.connect()
    assert not connected


async def receive_seqs(socket: WebsocketCommunicator, until: int) -> list[int]:
    """Every event number the socket delivers, one entry per event per message, until it has
    sent `until`."""
    seen: list[int] = []
    while not seen or max(seen) < until:
        html = await socket.receive_from(timeout=10)
        seen.extend(sorted({int(seq) for seq in SEQ.findall(html)}))
    return seen


async def test_reconnecting_mid_run_loses_nothing_and_repeats_nothing(
    run: Conversation, admin_user: User
) -> None:
    cookie = (b"cookie", await database_sync_to_async(session_cookie)(admin_user))
    await database_sync_to_async(add_events)(run, 5)

    first = communicator(run, ORIGIN, cookie)
    assert (await first.connect())[0]
    await first.send_json_to({"last_seq": 0})
    # Events go on arriving while the page reads the replay.
    publishing = asyncio.ensure_future(database_sync_to_async(add_events)(run, 10))
    seen = await receive_seqs(first, 8)
    await publishing
    await first.disconnect()

    # More happen while the page is away; it reconnects saying what it has.
    await database_sync_to_async(add_events)(run, 5)
    second = communicator(run, ORIGIN, cookie)
    assert (await second.connect())[0]
    await second.send_json_to({"last_seq": max(seen)})
    publishing = asyncio.ensure_future(database_sync_to_async(add_events)(run, 5))
    seen += await receive_seqs(second, 25)
    await publishing
    assert seen == list(range(1, 26))
    await second.disconnect()


async def test_a_live_event_after_a_gap_brings_the_missing_ones(
    run: Conversation, admin_user: User
) -> None:
    cookie = (b"cookie", await database_sync_to_async(session_cookie)(admin_user))
    socket = communicator(run, ORIGIN, cookie)
    assert (await socket.connect())[0]
    await socket.send_json_to({"last_seq": 0})
    # Saved but never published (as if the layer had dropped them) ...
    for _ in range(3):
        await database_sync_to_async(services.append_event)(
            run, kind="text_delta", payload={"kind": "text_delta", "step": 1, "text": "y"}
        )
    # ... then one that is published.
    await database_sync_to_async(add_events)(run, 1)
    assert await receive_seqs(socket, 4) == [1, 2, 3, 4]
    await socket.disconnect()


async def test_the_socket_closes_after_the_end_of_the_run(
    run: Conversation, admin_user: User
) -> None:
    cookie = (b"cookie", await database_sync_to_async(session_cookie)(admin_user))
    socket = communicator(run, ORIGIN, cookie)
    assert (await socket.connect())[0]
    await socket.send_json_to({"last_seq": 0})

    def finish() -> Any:
        payload = {"kind": "run_finished", "reason": "answered", "final_text": "<b>done</b>"}
        services.publish_event(services.append_event(run, kind="run_finished", payload=payload))

    await database_sync_to_async(finish)()
    html = await socket.receive_from(timeout=10)
    assert 'data-status="succeeded"' in html
    assert "&lt;b&gt;done&lt;/b&gt;" in html
    assert (await socket.receive_output(timeout=5))["type"] == "websocket.close"


async def test_a_lost_last_event_is_found_once_the_page_has_been_quiet(
    run: Conversation, admin_user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A gap shows only when a later event comes; the run's end has none after it.
    monkeypatch.setattr("assessments.consumers.QUIET_RECHECK_S", 0.2)
    cookie = (b"cookie", await database_sync_to_async(session_cookie)(admin_user))
    socket = communicator(run, ORIGIN, cookie)
    assert (await socket.connect())[0]
    await socket.send_json_to({"last_seq": 0})
    await database_sync_to_async(add_events)(run, 2)
    assert await receive_seqs(socket, 2) == [1, 2]
    payload = {"kind": "run_finished", "reason": "answered", "final_text": "done"}
    await database_sync_to_async(services.append_event)(run, kind="run_finished", payload=payload)
    html = await socket.receive_from(timeout=5)  # saved, never published
    assert 'data-seq="3"' in html and 'data-status="succeeded"' in html
    assert (await socket.receive_output(timeout=5))["type"] == "websocket.close"


async def test_live_events_are_relayed_without_a_hop_to_the_sync_thread(
    run: Conversation, admin_user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Channels closes old connections on its one sync thread before every message; with a
    # hundred pages on a run, those hops queued behind each event (benchmark 3).
    hops: list[str] = []

    async def counted() -> None:
        hops.append("hop")

    monkeypatch.setattr("channels.consumer.aclose_old_connections", counted)
    # Only live relays here: no quiet recheck of the database on a slow machine.
    monkeypatch.setattr("assessments.consumers.QUIET_RECHECK_S", 60.0)
    cookie = (b"cookie", await database_sync_to_async(session_cookie)(admin_user))
    socket = communicator(run, ORIGIN, cookie)
    assert (await socket.connect())[0]
    await socket.send_json_to({"last_seq": 0})
    await asyncio.sleep(0.1)
    before = len(hops)
    await database_sync_to_async(add_events)(run, 3)
    assert await receive_seqs(socket, 3) == [1, 2, 3]
    assert len(hops) == before
    await socket.disconnect()


async def test_with_the_layer_down_the_page_reads_the_database_and_is_live_again_after(
    run: Conversation, admin_user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("assessments.consumers.POLL_S", 0.1)
    monkeypatch.setattr("assessments.fanout.READ_RETRY_SECONDS", 0.05)
    monkeypatch.setattr("assessments.fanout.JOIN_TIMEOUT_S", 0.2)
    layer = BlinkingLayer()
    layer.down = True
    fanout = GroupFanout(layer, Outage())
    monkeypatch.setattr("assessments.consumers.fanout", lambda: fanout)
    await database_sync_to_async(add_events)(run, 2)  # before the page opened
    cookie = (b"cookie", await database_sync_to_async(session_cookie)(admin_user))
    socket = communicator(run, ORIGIN, cookie)
    assert (await socket.connect())[0]  # the layer being down does not refuse the page
    await socket.send_json_to({"last_seq": 0})
    assert await receive_seqs(socket, 2) == [1, 2]  # the replay

    # Saved while the layer is down (publishing fails): read by polling.
    await database_sync_to_async(add_events)(run, 2)
    assert await receive_seqs(socket, 4) == [3, 4]

    # Back: the page reads what went by meanwhile, then gets live events, each once.
    layer.down = False
    await database_sync_to_async(services.append_event)(
        run, kind="text_delta", payload={"kind": "text_delta", "step": 1, "text": "x"}
    )
    assert await receive_seqs(socket, 5) == [5]
    async with asyncio.timeout(5):
        while not fanout.is_live(services.run_group(run.pk)):
            await asyncio.sleep(0.01)
    for seq in (6, 7):
        event = await database_sync_to_async(services.append_event)(
            run, kind="text_delta", payload={"kind": "text_delta", "step": 1, "text": "y"}
        )
        await fanout._layer.group_send(
            services.run_group(run.pk),
            {"type": "run.event", "seq": seq, "html": f'<i data-seq="{event.seq}"></i>'},
        )
    assert await receive_seqs(socket, 7) == [6, 7]
    await socket.disconnect()
