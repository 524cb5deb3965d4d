"""The scaled-out configuration for real: PostgreSQL, Redis (channels_redis) and three workers.

CI's second pass sets DATABASE_URL (PostgreSQL) and REDIS_URL. The site runs as `up` runs its
processes, with three task workers instead of one; a burst of Reassess requests for several
releases, all at once from several sessions, must give one run per release, each run done
exactly once by one of the workers, its events relayed in order to a websocket client
through Redis, and no run left running. (The embedded default's processes, web server and
one worker over the SQLite channel layer, are what the browser tests run on.)
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from channels_redis.core import RedisChannelLayer
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.db import connection
from django_tasks import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from bench.ws import WebSocket
from releases.models import AgentEvent, Conversation, Release, RiskReport, RunStatus
from tests.live_site import LiveSite
from tests.llm_server import ScriptedLLM

SCALED_OUT = bool(settings.CONFIG.redis_url) and connection.vendor == "postgresql"
# CI's second pass sets this: there the test must run, never skip.
REQUIRED = bool(os.environ.get("DETECTIVE_CI_SCALED_OUT"))
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not SCALED_OUT and not REQUIRED,
        reason="needs the scaled-out configuration: DATABASE_URL on PostgreSQL and REDIS_URL "
        "(CI's second pass); the embedded default's processes are covered by tests/browser",
    ),
]

WORKERS = 3
RELEASES = 4
SESSIONS = 5  # each clicks Reassess on every release, all at the same moment
SEQ = re.compile(r'data-seq="(\d+)"')


def test_a_burst_of_reassess_requests_on_three_workers_runs_each_release_once(
    make_release: Callable[..., Release],
    django_user_model: type[User],
    tmp_path: Path,
) -> None:
    assert SCALED_OUT, (
        "DETECTIVE_CI_SCALED_OUT is set: DATABASE_URL must be PostgreSQL and REDIS_URL set"
    )
    releases = [
        make_release(f"v8.{n}.0", test_results={"passed": 50, "failed": n % 2, "skipped": 0})
        for n in range(RELEASES)
    ]
    # Release managers by their permissions (the staff flag grants nothing outside the
    # admin); given here, since a transactional test may have flushed the migrated group.
    may_assess = Permission.objects.filter(
        content_type__app_label="releases",
        codename__in=["run_assessment", "view_release", "view_riskreport", "view_conversation"],
    )
    users = [django_user_model.objects.create_user(f"manager{n}") for n in range(SESSIONS)]
    for user in users:
        user.user_permissions.add(*may_assess)
    with (
        # A piece a second until the run pages' sockets are open (the runs start at the
        # clicks, before them), then the model's pace: most events must arrive live.
        ScriptedLLM(delay=1.0, narration=30) as llm,
        LiveSite(tmp_path, llm.environment(), workers=WORKERS) as site,
    ):
        clients = [site.client(user) for user in users]
        clicks = [(client, release) for client in clients for release in releases]

        def click(pair: tuple[httpx.Client, Release]) -> str:
            client, release = pair
            response = client.post(
                f"/releases/{release.version}/reassess", headers={"HX-Request": "true"}
            )
            assert response.status_code == 200, response.text
            return response.headers["HX-Redirect"]

        with ThreadPoolExecutor(len(clicks)) as pool:
            answers = list(pool.map(click, clicks))
        runs = {release.pk: Conversation.objects.get(release=release) for release in releases}
        for (_, release), answer in zip(clicks, answers, strict=True):
            assert answer == f"/runs/{runs[release.pk].pk}/"

        cookie = f"sessionid={clients[0].cookies['sessionid']}"
        try:
            frames = asyncio.run(
                watch_all(
                    site,
                    cookie,
                    [run.pk for run in runs.values()],
                    opened=lambda: llm.configure(delay=0.02),
                )
            )
        except TimeoutError:
            states = {
                str(run.pk): (run.status, run.events.count()) for run in Conversation.objects.all()
            }
            pytest.fail(
                f"a run page's socket was still open after 90 s; runs (status, events): "
                f"{states}\n{site.log_text()}"
            )
        deadline = time.monotonic() + 30
        while Conversation.objects.filter(status__in=RunStatus.active()).exists():
            assert time.monotonic() < deadline, site.log_text()
            time.sleep(0.1)
        for client in clients:
            client.close()

    assert Conversation.objects.count() == RELEASES
    assert len(llm.requests) == 2 * RELEASES  # two model calls per run: no run went twice
    workers: set[str] = set()
    for run, received in zip(runs.values(), frames, strict=True):
        run.refresh_from_db()
        assert run.status == RunStatus.SUCCEEDED, run.error
        kinds = list(run.events.order_by("seq").values_list("kind", flat=True))
        assert kinds.count("run_started") == 1 and kinds[-1] == "run_finished"
        assert sum(kind in ("run_finished", "run_failed", "run_cancelled") for kind in kinds) == 1
        assert RiskReport.objects.filter(conversation=run).count() == 1
        # Every event reached the websocket client once, in order...
        per_frame = [list(dict.fromkeys(int(seq) for seq in SEQ.findall(f))) for f in received]
        delivered = [seq for frame in per_frame for seq in frame]
        assert delivered == list(range(1, len(kinds) + 1)), delivered
        # ... and most of them live, one per message, from a worker through Redis (the
        # model waited for the sockets; a replay would come in one message).
        assert sum(len(frame) == 1 for frame in per_frame) >= len(kinds) // 2
        task = DBTaskResult.objects.get(pk=run.task_id)
        assert task.status == TaskResultStatus.SUCCESSFUL
        assert len(task.worker_ids) == 1
        workers.update(task.worker_ids)
    assert len(workers) >= 2, workers  # the runs were shared out
    assert AgentEvent.objects.filter(kind="run_started").count() == RELEASES


async def test_a_page_waiting_longer_than_the_redis_blocking_pop_keeps_its_socket() -> None:
    """A consumer waits in channels_redis's receive, a BZPOPMIN of 5 s repeated; a read
    timeout no longer than that (redis-py 8's default) would end every quiet page's socket."""
    assert SCALED_OUT, "DETECTIVE_CI_SCALED_OUT is set: REDIS_URL must be set"
    layer = RedisChannelLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"])
    channel = await layer.new_channel()
    quiet = layer.brpop_timeout + 2
    with pytest.raises(TimeoutError):  # still waiting, not a redis error
        await asyncio.wait_for(layer.receive(channel), timeout=quiet)
    await layer.send(channel, {"type": "still.there"})
    assert await asyncio.wait_for(layer.receive(channel), timeout=5) == {"type": "still.there"}


async def watch_all(
    site: LiveSite, cookie: str, run_ids: list[object], opened: Callable[[], None]
) -> list[list[str]]:
    """Open a run page's websocket for each run, as the page does, and record what each
    receives until the server closes it after the run's end; `opened()` once all are open."""
    waiting = len(run_ids)

    async def watch(run_id: object) -> list[str]:
        nonlocal waiting
        socket = await WebSocket.connect(
            f"{site.ws_url}/ws/runs/{run_id}/", origin=site.url, cookie=cookie
        )
        await socket.send_text(json.dumps({"last_seq": 0}))
        waiting -= 1
        if waiting == 0:
            opened()
        await socket.listen()
        assert socket.close_code == 1000, socket.close_code
        return [message.text for message in socket.messages]

    async with asyncio.timeout(90):
        return list(await asyncio.gather(*(watch(run_id) for run_id in run_ids)))
