"""`manage.py up` as a fault test starts it, and what its tests share: the site on this test
process's database, the browser session, Reassess, a prober of the web server, and their fixtures.

`up` runs on this test process's database (SQLite file or PostgreSQL; the tests' data is
committed, `transaction=True`), so a test reads the runs and task rows with the ORM.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from detective_site.config import BASE_DIR
from releases.models import AgentEvent, Conversation, Release
from tests.live_site import START_TIMEOUT, free_port, subprocess_environment
from tests.llm_server import ScriptedLLM

STOP_TIMEOUT = 15


def _children(pid: int) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry.name)] = cmdline
    return found


class Up:
    """`manage.py up` as a user starts it (DEBUG unset), on the test database."""

    def __init__(self, tmp_path: Path, environment: dict[str, str], *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / "up.log"
        env = subprocess_environment(
            {
                **environment,
                "DETECTIVE_DATA_DIR": str(tmp_path / "data"),
                "DEBUG": "",
                # The sessions this test makes are signed with its key.
                "SECRET_KEY": settings.SECRET_KEY,
            }
        )
        env.pop("DETECTIVE_API_URL", None)  # up gives the worker its web server's address
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    str(BASE_DIR / "manage.py"),
                    "up",
                    "--port",
                    str(self.port),
                    *args,
                ],
                cwd=BASE_DIR,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_until(self, check: Callable[[], bool], timeout: float, what: str) -> float:
        started = time.monotonic()
        while not check():
            if time.monotonic() - started > timeout:
                raise AssertionError(f"timed out waiting for {what}; up's output:\n{self.text()}")
            if self.process.poll() is not None:
                raise AssertionError(f"up exited ({self.process.returncode}):\n{self.text()}")
            time.sleep(0.05)
        return time.monotonic() - started

    def worker_pid(self) -> int | None:
        workers = [pid for pid, cmd in _children(self.process.pid).items() if b"run_worker" in cmd]
        return workers[0] if len(workers) == 1 else None

    def ready(self) -> None:
        self.wait_until(
            lambda: (
                "Detective is running at" in self.text()
                and "Starting worker worker_id=" in self.text()
            ),
            START_TIMEOUT,
            "up to serve",
        )

    def kill(self) -> None:
        if self.process.poll() is None:
            for pid in _children(self.process.pid):
                os.killpg(pid, signal.SIGKILL)
            self.process.kill()
            self.process.wait()


@pytest.fixture
def manager(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_superuser("manager", password="a-long-password")


@pytest.fixture
def release(make_release: Callable[..., Release]) -> Release:
    return make_release("v2.1.0", test_results={"passed": 140, "failed": 2, "skipped": 0})


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(delay=0.05, narration=600) as server:
        yield server


@pytest.fixture
def up(tmp_path: Path, llm: ScriptedLLM, release: Release, manager: User) -> Iterator[Up]:
    # The release and the user first: up seeds the demo releases into an empty database.
    site = Up(tmp_path, llm.environment())
    try:
        site.ready()
        yield site
    finally:
        site.kill()


def browser(site: Up, user: User) -> httpx.Client:
    client = Client()
    client.force_login(user)
    http = httpx.Client(base_url=site.url, timeout=10)
    http.cookies.set("sessionid", client.cookies["sessionid"].value)
    http.get("/accounts/login/").raise_for_status()
    http.headers["X-CSRFToken"] = http.cookies["csrftoken"]
    return http


def reassess(http: httpx.Client, release: Release) -> Conversation:
    response = http.post(f"/releases/{release.version}/reassess", headers={"HX-Request": "true"})
    assert response.status_code == 200, response.text
    match = re.fullmatch(r"/runs/([0-9a-f-]+)/", response.headers["HX-Redirect"])
    assert match
    return Conversation.objects.get(pk=match.group(1))


def streaming(run: Conversation) -> Callable[[], bool]:
    return lambda: AgentEvent.objects.filter(conversation=run, kind="text_delta").count() > 5


def assert_no_event_lost(run: Conversation) -> None:
    """Events are numbered 1, 2, 3 ... per run: a gap is a lost event, the end is terminal."""
    seqs = list(run.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert run.events.order_by("-seq").first().kind in ("run_failed", "run_cancelled")


def status(run: Conversation) -> str:
    return Conversation.objects.values_list("status", flat=True).get(pk=run.pk)


class Prober:
    """Asks the web server for a page every 50 ms and counts what did not answer 200."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ok = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._probe, daemon=True)

    def _probe(self) -> None:
        with httpx.Client(base_url=self.url, timeout=5) as http:
            while not self._stop.wait(0.05):
                try:
                    answer = http.get("/accounts/login/")
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                    continue
                if answer.status_code == 200:
                    self.ok += 1
                else:
                    self.failures.append(str(answer.status_code))

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
