"""Redis stops for 10 s mid-run, under an open run page: the page shows every event by the end.

The scaled-out configuration (PostgreSQL + Redis), with a Redis of this test's own on a free
port (never the machine's, which other processes use): the web server and a worker, as `up`
runs them, Chromium on the run page. Redis is either paused (SIGSTOP: connections are
accepted and never answered) or shut down and started again empty (its groups forgotten),
for 10 s while the model streams. Meanwhile the run goes on (its events are saved before they
are published) and the page reads them from the database; after, it is live again; at the
end it holds every event once, without a reload, and each log has one warning for the outage,
no traceback. `-s` prints the figures.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from playwright.sync_api import Page, expect

from releases.models import AgentEvent, Conversation, Release, RunStatus
from tests.browser import chromium as helpers
from tests.browser.run_page_test import (
    ARRIVALS,
    RunPage,
    Socket,
    assert_delivered_exactly_once,
    assert_same_as_a_fresh_load,
)
from tests.live_site import HOST, LiveSite, free_port, wait_for
from tests.llm_server import ScriptedLLM
from tests.scaled_out_test import pytestmark as scaled_out_marks

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
# The scaled-out test's marks: PostgreSQL and REDIS_URL (CI's second pass), transactional.
pytestmark = [pytest.mark.browser, *scaled_out_marks]

OUTAGE_S = 10.0
OUTAGE_WARNING = "the channel layer is not answering"
# When each event reached the page (ms, the page's clock), beside the run page test's record.
TIMES = """
window.__times = [];
document.addEventListener("DOMContentLoaded", function () {
  new MutationObserver(function (records) {
    records.forEach(function (record) {
      record.addedNodes.forEach(function (node) {
        if (node.nodeType === 1 && node.dataset && node.dataset.seq)
          window.__times.push([Number(node.dataset.seq), Date.now()]);
      });
    });
  }).observe(document.body, { childList: true, subtree: true });
});
"""


class Redis:
    """A redis-server of the test's own, on a free port, with nothing saved to disk."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://{HOST}:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        argv = [REDIS_SERVER, "--port", str(self.port), "--bind", HOST, "--save", "",
                "--appendonly", "no", "--dir", str(self.directory)]  # fmt: skip
        with (self.directory / "redis.log").open("a") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_for(self._answers, 10, f"redis-server on port {self.port}", self._log)

    def _answers(self) -> bool:
        probe = subprocess.run(
            ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True
        )
        return probe.stdout.strip() == "PONG"

    def _log(self) -> str:
        return (self.directory / "redis.log").read_text(errors="replace")

    def signal(self, signum: int) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signum)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGCONT)  # a paused server cannot stop
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Redis]:
    server = Redis(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def manager(django_user_model: type[User]) -> User:
    user = django_user_model.objects.create(username="manager", password=helpers.password_hash())
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="releases",
            codename__in=["run_assessment", "view_release", "view_riskreport"],
        )
    )
    return user


def shown(page: Page) -> int:
    """The number of the newest event the page shows."""
    return int(
        page.evaluate(
            "Math.max(0, ...Array.from(document.querySelectorAll('#run [data-seq]'),"
            " e => Number(e.dataset.seq) || 0))"
        )
    )


def saved(run_id: str) -> int:
    return AgentEvent.objects.filter(conversation_id=run_id).count()


@pytest.mark.parametrize("outage", ["pause", "restart"])
def test_redis_stopped_for_10_s_mid_run_the_open_page_shows_every_event_by_the_end(
    outage: str,
    redis: Redis,
    manager: User,
    make_release: Callable[..., Release],
    tmp_path: Path,
) -> None:
    verdict, reason = helpers.without_chromium(helpers.CHROMIUM, os.environ)
    if verdict != "run":
        (pytest.fail if verdict == "fail" else pytest.skip)(reason)
    release = make_release("v9.4.0", test_results={"passed": 140, "failed": 2, "skipped": 0})
    # About 40 s of streaming in the first step: the outage falls well inside it.
    with (
        ScriptedLLM(delay=0.05, narration=800) as llm,
        LiveSite(tmp_path / "site", {**llm.environment(), "REDIS_URL": redis.url}) as site,
        helpers.chromium() as browser,
    ):
        context = browser.new_context(base_url=site.url, viewport=helpers.DESKTOP)
        context.add_cookies(
            [{"name": "sessionid", "value": site.session_cookie(manager), "url": site.url}]
        )
        context.add_init_script(ARRIVALS)
        context.add_init_script(TIMES)
        page = context.new_page()
        page.set_default_timeout(20_000)
        sockets: list[Socket] = []

        def watch(socket: object) -> None:
            if "/ws/runs/" in socket.url:  # type: ignore[attr-defined]
                frames = Socket()
                sockets.append(frames)
                socket.on("framesent", lambda p: frames.sent.append(_text(p)))  # type: ignore[attr-defined]
                socket.on("framereceived", lambda p: frames.received.append(_text(p)))  # type: ignore[attr-defined]

        page.on("websocket", watch)
        page.goto(f"/releases/{release.version}/")
        page.get_by_role("button", name=re.compile(r"^(Re)?assess$", re.I)).click()
        page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
        run_id = page.url.rstrip("/").rsplit("/", 1)[-1]
        page.evaluate("window.__sameDocument = true")  # gone if the page reloads
        page.wait_for_function(
            "document.querySelectorAll('#step-1-text span[data-seq]').length >= 5"
        )

        # Redis goes away for 10 s.
        before_outage = shown(page)
        if outage == "pause":
            redis.signal(signal.SIGSTOP)
        else:
            redis.stop()
        time.sleep(OUTAGE_S / 2)
        saved_midway, shown_midway = saved(run_id), shown(page)
        time.sleep(OUTAGE_S / 2)
        during = shown(page)
        assert Conversation.objects.get(pk=run_id).status == RunStatus.RUNNING
        if outage == "pause":
            redis.signal(signal.SIGCONT)
        else:
            redis.start()
        back_at = page.evaluate("Date.now()")
        # Live again: more than ten events at the model's pace from 3 s after (what is
        # asserted below); then the rest of the stream, some 20 s at this delay, comes at once.
        page.wait_for_function(
            f"window.__times.filter(([, t]) => t > {back_at + 3_000}).length > 10",
            timeout=60_000,
        )
        llm.configure(delay=0)

        status = page.locator("#run-status")
        expect(status).to_have_attribute(
            "data-status", re.compile("succeeded|failed"), timeout=90_000
        )
        assert status.get_attribute("data-status") == "succeeded", site.log_text()
        run = RunPage(page, sockets).run()
        total = saved(run_id)
        times = page.evaluate("window.__times")
        assert page.evaluate("window.__sameDocument === true")  # no reload
        assert len(sockets) == 1, "the page's socket was closed"
        assert_delivered_exactly_once(sockets[0], total)
        assert_same_as_a_fresh_load(RunPage(page, sockets))
        web_log = (tmp_path / "site" / "web.log").read_text()
        worker_log = (tmp_path / "site" / "worker-0.log").read_text()
        context.close()

    assert run.status == RunStatus.SUCCEEDED, run.error
    # The run went on, saving events, and the page read them from the database meanwhile.
    assert saved_midway > before_outage
    assert shown_midway > before_outage and during > shown_midway
    # Live again after: events came at the model's pace, not the quiet recheck's 3 s.
    first_after = min(t for _, t in times if t > back_at)
    after = sorted(t for _, t in times if t > back_at + 3_000)
    gaps = [b - a for a, b in itertools.pairwise(after)]
    assert len(after) > 10 and max(gaps) < 2_500, gaps
    # One warning per process for the outage, the end said once, no traceback.
    for name, log in (("web", web_log), ("worker", worker_log)):
        assert log.count(OUTAGE_WARNING) == 1, f"{name}:\n{log[-4000:]}"
        assert log.count("answers again") == 1, f"{name}:\n{log[-4000:]}"
        assert "Traceback" not in log, f"{name}:\n{log[-4000:]}"
    print(
        f"\nRedis {outage} {OUTAGE_S:g} s: {total} events, {before_outage} shown before, "
        f"{during} at the end of the outage ({saved_midway} saved half-way), all "
        f"{total} by the end; "
        f"first event after it {(first_after - back_at) / 1000:.1f} s after Redis was back, "
        f"largest gap from 3 s after {max(gaps) / 1000:.2f} s"
    )


def _text(payload: str | bytes) -> str:
    return payload.decode() if isinstance(payload, bytes) else payload
