"""PostgreSQL restarts mid-run (`pg_ctl -m fast restart`) under a live site and its pages.

A throwaway PostgreSQL cluster of this test's own (initdb, on a free port, run as the
`postgres` user when the test runs as root, since PostgreSQL refuses root), never the
machine's: the web server and a worker, as `up` runs them, on a database migrated there (once
per module; each test gets a copy). A run
streams; the cluster restarts under it while a prober loads a page every 50 ms. The run
goes on through the restart (its database calls are retried for a bounded time), the worker
keeps running, and the pages answer 503 with a short page, never 500, while the database is
away. Runs on either configuration (the site's own database is the private cluster); skipped
where PostgreSQL's server binaries are not installed. `-s` prints the figures.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from detective_site.config import BASE_DIR
from tests.live_site import HOST, LiveSite, free_port, wait_for
from tests.llm_server import ScriptedLLM

BINARIES = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
pytestmark = pytest.mark.skipif(
    not BINARIES, reason="PostgreSQL's server binaries (initdb, pg_ctl) are not installed"
)
STATUS = re.compile(r'id="run-status"[^>]*data-status="(\w+)"')


class PrivatePostgres:
    """A PostgreSQL cluster in a temporary directory, on a free port, trusting local users."""

    def __init__(self) -> None:
        self.bin = Path(BINARIES[-1])
        self.port = free_port()
        # Outside pytest's tmp_path: its parents are root's alone, and the server runs as
        # the postgres user when the test runs as root.
        self.directory = Path(tempfile.mkdtemp(prefix="detective-pg-"))
        self.data = self.directory / "data"
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *argv: str, timeout: float = 60) -> str:
        done = subprocess.run(
            [*self.as_user, *argv], capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}\n{self.log()}"
        return done.stdout

    def log(self) -> str:
        try:
            return (self.directory / "server.log").read_text(errors="replace")[-3000:]
        except FileNotFoundError:
            return ""

    def start(self) -> None:
        if self.as_user:
            shutil.chown(self.directory, "postgres")
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres")
        self._ctl("start")

    def url(self, database: str) -> str:
        return f"postgres://postgres@{HOST}:{self.port}/{database}"

    def create_database(self, name: str, template: str = "template1") -> None:
        self._run(str(self.bin / "createdb"), "-h", HOST, "-p", str(self.port), "-U",
                  "postgres", "-T", template, name)  # fmt: skip

    def ensure_running(self) -> None:
        """Started again if a test before this one left it stopped (failing mid-outage)."""
        status = subprocess.run(
            [*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "status"],
            capture_output=True, timeout=60,
        )  # fmt: skip
        if status.returncode != 0:
            self._ctl("start")

    def _ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses={HOST}"
        log = str(self.directory / "server.log")
        pg_ctl = str(self.bin / "pg_ctl")
        self._run(pg_ctl, "-D", str(self.data), "-l", log, "-o", options, "-w", *extra, action)

    def restart(self) -> None:
        self._ctl("restart", "-m", "fast")

    def halt(self) -> None:
        self._ctl("stop", "-m", "fast")

    def resume(self) -> None:
        self._ctl("start")

    def stop(self) -> None:
        if self.data.exists():
            subprocess.run(
                [*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m",
                 "immediate", "-w", "stop"], capture_output=True, timeout=60,
            )  # fmt: skip
        shutil.rmtree(self.directory, ignore_errors=True)


SETUP = """
from django.contrib.auth.models import Permission, User
from django.test import Client
from releases import services
user = User.objects.create(username="manager")
user.user_permissions.add(*Permission.objects.filter(content_type__app_label="releases",
    codename__in=["run_assessment", "view_release", "view_riskreport"]))
services.create_release(version="v9.5.0", title="A release", changes=["Rewrote checkout"],
    test_results={"passed": 140, "failed": 2, "skipped": 0},
    deployment_metrics={"error_rate": 0.01, "response_time_p95": 300})
client = Client()
client.force_login(user)
print("SESSION", client.cookies["sessionid"].value)
"""

RESULT = """
import json
from releases.models import Conversation
run = Conversation.objects.get()
print("RESULT", json.dumps({"status": run.status, "error": run.error, "headline": run.headline,
    "events": run.events.count(), "seqs": list(run.events.values_list("seq", flat=True))}))
"""


def manage(environment: dict[str, str], *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=BASE_DIR,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done.stdout


TEMPLATE = "detective_template"


class Cluster:
    """The module's private cluster, with a database migrated and filled once (`SETUP`), each
    test's database a copy of it (CREATE DATABASE ... TEMPLATE), and the static files `up`
    collects: migrating and collecting cost more than the rest of a test."""

    def __init__(self, postgres: PrivatePostgres, staticfiles: Path, session: str) -> None:
        self.postgres, self.staticfiles, self.session = postgres, staticfiles, session
        self._databases = 0

    def copy(self) -> str:
        """A fresh database like the migrated one; its URL."""
        self.postgres.ensure_running()
        self._databases += 1
        name = f"detective_{self._databases}"
        self.postgres.create_database(name, template=TEMPLATE)
        return self.postgres.url(name)


# Every process the tests start signs the session cookie with the same key, whatever data dir.
SECRET_KEY = "faults-database-test-key-" + "x" * 40


def private_environment(url: str, data: Path) -> dict[str, str]:
    # DEBUG off, as under `up` (DEBUG's technical 500 page would hide the 503).
    return {
        "DATABASE_URL": url,
        "DETECTIVE_DATA_DIR": str(data),
        "DETECTIVE_SERVE_HOST": HOST,
        "SECRET_KEY": SECRET_KEY,
    }


def manage_environment(private: dict[str, str]) -> dict[str, str]:
    environment = {**os.environ, **private}
    environment.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return environment


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    server = PrivatePostgres()
    try:
        server.start()
        server.create_database(TEMPLATE)
        data = tmp_path_factory.mktemp("template-data")
        environment = manage_environment(private_environment(server.url(TEMPLATE), data))
        manage(environment, "migrate", "--no-input", "-v", "0")
        manage(environment, "collectstatic", "--no-input", "-v", "0")  # as `up` does
        session = manage(environment, "shell", "-c", SETUP).split("SESSION ", 1)[1].strip()
        yield Cluster(server, data / "staticfiles", session)
    finally:
        server.stop()


class Prober:
    """Loads a page every 50 ms on a thread of its own; counts the answers by status."""

    def __init__(self, client: httpx.Client, path: str) -> None:
        self.client, self.path = client, path
        self.answers: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._probe, daemon=True)

    def _probe(self) -> None:
        while not self._stop.wait(0.05):
            try:
                response = self.client.get(self.path, timeout=10)
                self.answers[str(response.status_code)] += 1
                if response.status_code == 503:
                    assert "Retry-After" in response.headers
            except httpx.HTTPError as error:
                self.answers[type(error).__name__] += 1

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# A restart (1.5 s here) is survived; a database away for longer than the run's wait for it
# fails the run, saying so, once it is back. The wait is 20 s by default, 6 s here: what is
# tested is the run outliving its wait, not the length of the wait. The database comes back
# once the run has given up, which its second warning says (the first store call after it),
# and must then be back within the wait for that call (pg_ctl start takes 1 to 3 s here).
RUN_DATABASE_WAIT_S = 6
WAITING = "the run tries again for up to"
STREAMS: dict[str, dict[str, Any]] = {
    "restart": {"delay": 0.05, "narration": 600},
    "away past the run's wait": {"delay": 0.2},
}


# The site's database is this module's private cluster in both of CI's passes, and the
# channel layer (SQLite file or Redis) never meets it: the second pass would run the same test.
@pytest.mark.backend_independent
@pytest.mark.parametrize("outage", ["restart", "away past the run's wait"])
def test_postgresql_restarting_mid_run_the_run_goes_on_and_pages_answer_503_meanwhile(
    outage: str, cluster: Cluster, tmp_path: Path
) -> None:
    postgres = cluster.postgres
    private = private_environment(cluster.copy(), tmp_path)
    shutil.copytree(cluster.staticfiles, tmp_path / "staticfiles")
    environment = manage_environment(private)
    # No heartbeat can be saved while the database is away: an outage that, with pg_ctl's own
    # time on a loaded machine, neared the stale limit (30 s) would race the sweep. The limit
    # is raised for the outage, so that what is tested is the run's own verdict.
    away = {
        "DETECTIVE_RUN_STALE_SECONDS": "90",
        "DETECTIVE_RUN_DATABASE_WAIT": str(RUN_DATABASE_WAIT_S),
    }
    changed = away if outage != "restart" else {}

    with (
        ScriptedLLM(**STREAMS[outage]) as llm,
        LiveSite(tmp_path / "site", {**llm.environment(), **private, **changed}) as site,
        httpx.Client(base_url=site.url, timeout=30) as client,
    ):
        client.cookies.set("sessionid", cluster.session)
        client.get("/accounts/login/").raise_for_status()
        client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
        answer = client.post("/releases/v9.5.0/reassess", headers={"HX-Request": "true"})
        assert answer.status_code == 200, answer.text
        run_page = answer.headers["HX-Redirect"]

        def streaming() -> bool:
            page = client.get(run_page).text
            if outage == "restart":
                # Mid-way through the first reply's 600 words of narration (about 20 s of
                # stream): the restart meets the run while it saves text as it streams.
                return "step40 " in page
            # The release read (the run then fails with its report's reason), the second reply
            # streaming (seconds at this delay): the run meets the outage as it saves.
            return 'data-kind="tool_result"' in page

        wait_for(streaming, 60, "the run to stream", site.log_text)
        worker_pid = site.processes[1].pid
        with Prober(client, "/releases/") as prober:
            wait_for(lambda: prober.answers["200"] > 0, 30, "a page before", site.log_text)
            began = time.monotonic()
            if outage == "restart":
                postgres.restart()
            else:
                postgres.halt()
                try:
                    wait_for(
                        lambda: site.worker_logs[0].read_text().count(WAITING) >= 2,
                        60,
                        "the run to give up waiting for its database",
                        site.log_text,
                    )
                finally:
                    postgres.resume()
            restarted_in = time.monotonic() - began
            before = prober.answers["200"]
            wait_for(lambda: prober.answers["200"] > before, 30, "a page after", site.log_text)

        def status() -> str:
            match = STATUS.search(client.get(run_page).text)
            return match.group(1) if match else ""

        if outage == "restart":  # the restart met the run mid-stream, not after it
            assert status() == "running", site.log_text()
        # The outage is over: the rest of the model's stream comes at once.
        llm.configure(delay=0)

        def ended() -> bool:
            return status() in ("succeeded", "failed", "cancelled")

        wait_for(ended, 90, "the run to end", site.log_text)
        worker_alive = site.processes[1].poll() is None and site.processes[1].pid == worker_pid
        worker_log = (tmp_path / "site" / "worker-0.log").read_text()
        web_log = (tmp_path / "site" / "web.log").read_text()
        logs = site.log_text()

    result = json.loads(manage(environment, "shell", "-c", RESULT).split("RESULT ", 1)[1])
    print(
        f"\nPostgreSQL {outage}: back in {restarted_in:.1f} s mid-run: run {result['status']} "
        f"({result['events']} events) {result['headline'] or result['error']}; probes "
        f"{dict(prober.answers)}; worker {'kept' if worker_alive else 'restarted'}; web log "
        f"{web_log.count('Service Unavailable')} 503 line(s), "
        f"{web_log.count('Traceback')} traceback(s)"
    )
    assert worker_alive, logs
    if outage == "restart":
        assert result["status"] == "succeeded", f"{result}\n{logs}"
    else:
        assert result["status"] == "failed", f"{result}\n{logs}"
        assert result["error"].startswith("The database was unavailable: "), result["error"]
        assert "The database was unavailable" in result["headline"], result["headline"]
        # The run gave up after its wait, while the database was still away.
        assert f"{WAITING} {RUN_DATABASE_WAIT_S} s" in worker_log, worker_log[-4000:]
    assert result["seqs"] == list(range(1, result["events"] + 1))  # no gap, none twice
    assert "500" not in prober.answers, (dict(prober.answers), logs)
    assert prober.answers["200"] > 0, dict(prober.answers)
    assert worker_log.count("the database is not answering") <= 2, worker_log[-4000:]
    assert "Traceback" not in worker_log, worker_log[-4000:]
    # One line for the outage's 503s, not a traceback each.
    assert web_log.count("Service Unavailable") == 1, web_log[-4000:]
