"""A live Detective for integration and browser tests: processes of their own, as `up` runs them.

`LiveSite` starts the ASGI web server (daphne, with `up`'s own command line) and one or more
task workers (`run_worker`, as `up` starts it), each in its own process group, on this test
process's database (the SQLite file or PostgreSQL test database pytest-django made), data
dir and channel layer (the SQLite layer's file in the data dir, or Redis when REDIS_URL is
set). The tests' data must be committed to be seen: use `django_db(transaction=True)`.

Every process is stopped by its own id (SIGTERM to its group, then SIGKILL), never by name.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import httpx
from django.conf import settings
from django.db import connection
from django.test import Client

from bench.procs import stop
from detective_site.config import BASE_DIR
from detective_site.management.commands.up import Command as Up
from detective_site.management.commands.up import accepts_connections

HOST = "127.0.0.1"
START_TIMEOUT = 60  # a busy 2-core machine, with other test processes running
WORKER_READY = "Starting worker worker_id="
# Another process took the free port first: the site starts again on another (at most this often).
PORT_ATTEMPTS = 3
PORT_IN_USE = "Address already in use"
# Settings that belong to this test process alone, never to the processes it starts.
_TEST_ONLY = ("DJANGO_ALLOW_ASYNC_UNSAFE",)


class PortTaken(Exception):
    """The web server could not listen: the free port was taken before it bound it."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def database_url() -> str:
    """This test process's database (the test database), as DATABASE_URL."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def subprocess_environment(extra: dict[str, str]) -> dict[str, str]:
    """This test process's database, data dir and channel layer, for a process it starts."""
    environment = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DETECTIVE_DATA_DIR": str(settings.DATA_DIR),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }
    for name in _TEST_ONLY:
        environment.pop(name, None)
    return environment


def owns_listening_port(pid: int, port: int) -> bool:
    """Whether process `pid` holds the socket listening on `port` (Linux's /proc; elsewhere
    True, as it cannot be told). A free port can be taken by another process (another test
    worker's site) between `free_port` and the web server's bind; the server then fails while
    the port still accepts connections, from the other process."""
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        return True
    sockets = set()
    for table in tables:
        with contextlib.suppress(OSError):
            for line in table.read_text().splitlines()[1:]:
                fields = line.split()
                listening = fields[3] == "0A"
                if listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    sockets.add(f"socket:[{fields[9]}]")
    if not sockets:
        return False
    with contextlib.suppress(OSError):
        for descriptor in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(descriptor) in sockets:
                    return True
    return False


def wait_for(check: Callable[[], bool], timeout: float, what: str, log: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; logs:\n{log()}")
        time.sleep(0.05)


def _start(argv: list[str], environment: dict[str, str], log: Path) -> subprocess.Popen[str]:
    with log.open("w") as output:
        return subprocess.Popen(
            argv,
            cwd=BASE_DIR,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )


def start_worker(environment: dict[str, str], log: Path) -> subprocess.Popen[str]:
    """A task worker exactly as `manage.py up` starts it."""
    return _start(Up.worker_argv(verbosity=1), environment, log)


class LiveSite:
    """The web server and `workers` task workers; a context manager.

    `environment` is added to the processes' environment (the model server's variables,
    DETECTIVE_TELEMETRY ...). The workers' tools call this web server's API, as under `up`.
    """

    def __init__(self, logs: Path, environment: dict[str, str], *, workers: int = 1) -> None:
        self.logs = logs
        self.given_environment = environment
        self.worker_count = workers
        self.processes: list[subprocess.Popen[str]] = []
        self.worker_logs: list[Path] = []
        self._choose_port()

    def _choose_port(self) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.ws_url = f"ws://{HOST}:{self.port}"
        self.environment = subprocess_environment(
            {**self.given_environment, "DETECTIVE_API_URL": self.url}
        )

    def start(self) -> LiveSite:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return self._start()
            except PortTaken:
                if attempt == PORT_ATTEMPTS:
                    raise
                self._choose_port()
        raise AssertionError("unreachable")

    def _start(self) -> LiveSite:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.worker_logs = []
        self.processes.append(
            _start(Up.web_argv(HOST, self.port, 1), self.environment, self.logs / "web.log")
        )
        for number in range(self.worker_count):
            log = self.logs / f"worker-{number}.log"
            self.worker_logs.append(log)
            self.processes.append(start_worker(self.environment, log))
        try:
            wait_for(self._ready, START_TIMEOUT, "the web server and the workers", self.log_text)
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        web = self.processes[0]
        if PORT_IN_USE in _read(self.logs / "web.log"):
            raise PortTaken(self.port)
        for process in self.processes:
            if process.poll() is not None:
                raise AssertionError(
                    f"{process.args!r} exited with {process.returncode}:\n{self.log_text()}"
                )
        workers_up = all(WORKER_READY in _read(log) for log in self.worker_logs)
        return (
            workers_up
            and accepts_connections(HOST, self.port)
            and owns_listening_port(web.pid, self.port)
        )

    def stop(self) -> None:
        for process in self.processes:
            stop(process)
        self.processes.clear()

    def log_text(self) -> str:
        return "\n".join(
            f"--- {log.name}\n{_read(log)[-6000:]}" for log in sorted(self.logs.glob("*.log"))
        )

    def session_cookie(self, user: object) -> str:
        """A logged-in session of `user` (saved in the database, which the site reads)."""
        client = Client()
        client.force_login(user)  # type: ignore[arg-type]
        return client.cookies["sessionid"].value

    def client(self, user: object) -> httpx.Client:
        """An HTTP client logged in as `user`, with the CSRF cookie and header a form post
        needs."""
        client = httpx.Client(base_url=self.url, timeout=30, follow_redirects=False)
        client.cookies.set("sessionid", self.session_cookie(user))
        # The login page sets the CSRF cookie whatever the user may see.
        client.get("/accounts/login/").raise_for_status()
        client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
        return client

    def __enter__(self) -> LiveSite:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _read(log: Path) -> str:
    try:
        return log.read_text(errors="replace")
    except FileNotFoundError:
        return ""
