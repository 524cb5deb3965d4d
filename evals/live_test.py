"""The evals pages' websocket, through the site's whole ASGI stack and the configured layer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from asgiref.sync import SyncToAsync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from detective_site.asgi import application
from evals import services
from evals.models import EvalRun
from tests.eval_data import make_run, suite, trial

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://localhost")


@pytest.fixture(autouse=True, scope="module")
def _close_thread_connections() -> Iterator[None]:
    """The consumer's database calls run on asgiref's shared thread: close its connection,
    or PostgreSQL could not drop the test database."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


def session_cookie(user: User) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def socket(run_id: int, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, f"/ws/evals/runs/{run_id}/", headers=list(headers))


async def close_code(communicator: WebsocketCommunicator) -> int:
    connected, _ = await communicator.connect()
    assert connected
    message = await communicator.receive_output(timeout=5)
    assert message["type"] == "websocket.close"
    return int(message["code"])


def running_run() -> EvalRun:
    """Two scenarios x 3 trials planned, 2 of each done."""
    chosen = suite().scenarios[:2]
    done = {s.id: ["passed", "passed"] for s in chosen}
    return make_run(done, scenarios=chosen, trials=3, finish=False)


async def test_anonymous_users_and_outsiders_are_refused() -> None:
    run = await database_sync_to_async(running_run)()
    assert await close_code(socket(run.pk, ORIGIN)) == 4401
    user = await database_sync_to_async(User.objects.create_user)("guest", "", "pw-12345678")
    cookie = await database_sync_to_async(session_cookie)(user)
    assert await close_code(socket(run.pk, ORIGIN, (b"cookie", cookie))) == 4403


async def test_a_foreign_origin_is_refused(admin_user: User) -> None:
    run = await database_sync_to_async(running_run)()
    cookie = await database_sync_to_async(session_cookie)(admin_user)
    foreign = socket(run.pk, (b"origin", b"http://evil.example"), (b"cookie", cookie))
    connected, _ = await foreign.connect()
    assert not connected


async def test_an_unknown_run_is_refused(admin_user: User) -> None:
    cookie = await database_sync_to_async(session_cookie)(admin_user)
    assert await close_code(socket(987654, ORIGIN, (b"cookie", cookie))) == 4404


async def test_progress_now_then_after_each_trial_then_the_end(admin_user: User) -> None:
    run = await database_sync_to_async(running_run)()
    cookie = await database_sync_to_async(session_cookie)(admin_user)
    communicator = socket(run.pk, ORIGIN, (b"cookie", cookie))
    connected, _ = await communicator.connect()
    assert connected
    first = await communicator.receive_from(timeout=5)
    assert f'id="evalrun-progress-{run.pk}"' in first and 'hx-swap-oob="true"' in first
    assert "<strong>4</strong> of 6 trials" in first

    scenario = suite().scenarios[0]

    def record() -> None:
        services.record_result(run, trial(scenario, 3, "failed"))

    await database_sync_to_async(record)()
    update = await communicator.receive_from(timeout=5)
    assert "<strong>5</strong> of 6 trials" in update and "1 failed" in update

    await database_sync_to_async(services.finish_run)(run)
    end = await communicator.receive_from(timeout=5)
    assert "Succeeded" in end and "See the results" in end
    await communicator.disconnect()
