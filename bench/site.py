"""A throwaway Detective deployment for the benchmarks that need the whole site.

`Site` is a data directory under the run's scratch directory (its own SQLite database and
channel-layer file, traces...) and the environment that points Django at it, in production
mode (DEBUG off: cached templates, no query log), with the machine's Redis for the channel
layer when asked. It starts, each in a process of its own and stopped by its own id:

- the web server, as `manage.py up` starts it (daphne);
- task workers, as `up` starts them (`run_worker` over django-tasks' `db_worker`);
- a driver (`bench.driver`): a Django process the benchmark talks to over
  its stdin/stdout, to create data, log in, queue and run assessments, time pages;
- the model server (`llm_server`), which also plays the TLS-terminating proxy in front of
  the release API: production settings redirect plain HTTP to HTTPS, so the tools reach
  the API through it, as they would through the real proxy (`X-Forwarded-Proto: https`).

The database is migrated once per benchmark run (`template`) and copied for each site.
Nothing here listens anywhere but 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.harness import Context
from bench.procs import PROJECT_ROOT, rss_mb, started, stop, wait_for_line

SQLITE_FILE = "detective.sqlite3"
STATIC_DIR = "staticfiles"
# Settings the benchmark decides; nothing leaks in from the caller's environment or .env
# (an empty value means unset).
CONTROLLED = (
    "DATABASE_URL",
    "REDIS_URL",
    "DETECTIVE_DATA_DIR",
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "DETECTIVE_PROVIDER",
    "DETECTIVE_MODEL",
    "DETECTIVE_BASE_URL",
    "DETECTIVE_API_URL",
    "DETECTIVE_API_TOKEN",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "DETECTIVE_CAPTURE_CONTENT",
    "DETECTIVE_TRACE_PAGES",
)
REDIS_URL = "redis://127.0.0.1:6379/13"  # a database of its own: tests flush 0
READY_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def redis_available(url: str = REDIS_URL, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=timeout_s) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(16).startswith(b"+PONG")
    except OSError:
        return False


_TEMPLATE_LOCK = threading.Lock()


def template_dir(scratch: Path) -> Path:
    """A migrated SQLite database and the collected static files (production settings
    serve them from the manifest, as `up` prepares them), made once per benchmark run.

    Made in a folder of its own and moved into place when complete, under a lock: on a busy
    machine a benchmark can pass its deadline while the template is being made (its thread
    goes on), and the next one must wait for it, not copy a half-migrated database."""
    directory = scratch / "template"
    with _TEMPLATE_LOCK:
        if (directory / SQLITE_FILE).exists():
            return directory
        building = scratch / "template-building"
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        env = environment(building)
        # Both at once: they share nothing (the database, the static files).
        commands = [
            subprocess.Popen(
                [sys.executable, str(PROJECT_ROOT / "manage.py"), *command, "-v0"],
                cwd=PROJECT_ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
            )
            for command in (["migrate"], ["collectstatic", "--noinput"])
        ]
        for command in commands:
            if command.wait(timeout=600) != 0:
                raise RuntimeError(f"{command.args[2:]} failed ({command.returncode})")
        directory.mkdir(parents=True, exist_ok=True)
        if not (directory / STATIC_DIR).exists():
            (building / STATIC_DIR).rename(directory / STATIC_DIR)
        # The database last: its presence says the template is complete.
        (building / SQLITE_FILE).rename(directory / SQLITE_FILE)
    return directory


def migrated_copy(data_dir: Path, run_scratch: Path, *, static: bool = False) -> None:
    """The run's migrated SQLite database (and with `static`, its collected static files)
    copied into `data_dir`: a migration of its own costs a benchmark a Django process and
    seconds of CPU (14 s of CPU at load 13), which `bench --quick` (< 90 s) cannot spend five
    times over."""
    template = template_dir(run_scratch)
    data_dir.mkdir(parents=True, exist_ok=True)
    for leftover in data_dir.glob(f"{SQLITE_FILE}*"):
        leftover.unlink()
    shutil.copyfile(template / SQLITE_FILE, data_dir / SQLITE_FILE)
    if static:
        shutil.copytree(template / STATIC_DIR, data_dir / STATIC_DIR, dirs_exist_ok=True)


def environment(data_dir: Path, *, redis_url: str | None = None, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(dict.fromkeys(CONTROLLED, ""))
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "detective_site.settings",
            "PYTHONPATH": str(PROJECT_ROOT),
            "DETECTIVE_DATA_DIR": str(data_dir),
            "DEBUG": "false",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "REDIS_URL": redis_url or "",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


class Driver:
    """The driver process: one request, one answer (JSON lines)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    def call(self, op: str, timeout_s: float = 300.0, **arguments: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
        self.process.stdin.flush()
        line, _ = wait_for_line(self.process, "@@ ", timeout_s)
        answer: dict[str, Any] = json.loads(line[3:])
        if not answer.get("ok"):
            raise RuntimeError(f"driver {op} failed: {answer.get('error')}")
        return answer


class Site:
    def __init__(self, scratch: Path, name: str, *, redis: bool = False) -> None:
        self.data_dir = scratch / name
        self.data_dir.mkdir(parents=True, exist_ok=True)
        template = template_dir(scratch)
        shutil.copyfile(template / SQLITE_FILE, self.data_dir / SQLITE_FILE)
        shutil.copytree(template / STATIC_DIR, self.data_dir / STATIC_DIR, dirs_exist_ok=True)
        self.redis_url = REDIS_URL if redis else None
        self.secret = secrets.token_urlsafe(50)
        self.web_url = ""
        self.api_url = ""  # the proxy in front of the web server's API
        self.llm_url = ""
        # Before /v1 in the agent's base URL: how the model server behaves ("/latency/300").
        self.model_prefix = ""
        self.web_process: subprocess.Popen[str] | None = None

    def env(self, **extra: str) -> dict[str, str]:
        values = {"SECRET_KEY": self.secret}
        if self.api_url:
            values["DETECTIVE_API_URL"] = self.api_url
        if self.llm_url:
            values.update(
                {
                    "DETECTIVE_PROVIDER": "openai-compatible",
                    "DETECTIVE_MODEL": "scripted",
                    "DETECTIVE_BASE_URL": f"{self.llm_url}{self.model_prefix}/v1",
                }
            )
        values.update(extra)
        return environment(self.data_dir, redis_url=self.redis_url, **values)

    @contextmanager
    def running(self) -> Iterator[Driver]:
        """The web server, the model server in front of its API, and a driver, started side
        by side (each takes seconds to import Django); `web_process` is the web server."""
        port = free_port()
        self.web_url = f"http://127.0.0.1:{port}"
        try:
            with ExitStack() as stack:
                stack.enter_context(self.model_server())
                web = _spawn(_web_args(port), self.env(), self.data_dir / "web.log")
                stack.callback(stop, web)
                driver = stack.enter_context(self.driver())
                _wait_http(f"{self.web_url}/accounts/login/", web)
                self.web_process = web
                yield driver
        finally:
            self.web_url = ""
            self.web_process = None

    @contextmanager
    def web(self) -> Iterator[subprocess.Popen[str]]:
        port = free_port()
        process = _spawn(_web_args(port), self.env(), self.data_dir / "web.log")
        try:
            self.web_url = f"http://127.0.0.1:{port}"
            _wait_http(f"{self.web_url}/accounts/login/", process)
            yield process
        finally:
            stop(process)
            self.web_url = ""

    @contextmanager
    def model_server(self) -> Iterator[str]:
        """The model server, proxying /api/ to the web server (start that first)."""
        args = [sys.executable, "-m", "bench.llm_server", "--port", "0"]
        if self.web_url:
            args += ["--api-upstream", self.web_url]
        with started(args, ready="PORT ", env=self.env(), timeout_s=READY_TIMEOUT_S) as (
            _process,
            line,
        ):
            self.llm_url = f"http://127.0.0.1:{int(line.split()[1])}"
            self.api_url = self.llm_url if self.web_url else ""
            try:
                yield self.llm_url
            finally:
                self.llm_url = self.api_url = ""

    @contextmanager
    def driver(self, **extra: str) -> Iterator[Driver]:
        args = [sys.executable, "-m", "bench.driver"]
        process = subprocess.Popen(
            args,
            cwd=PROJECT_ROOT,
            env=self.env(**extra),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            wait_for_line(process, "@@ ", READY_TIMEOUT_S)
            yield Driver(process)
        finally:
            if process.stdin is not None:
                process.stdin.close()
            stop(process)
            if process.stdout is not None:
                process.stdout.close()

    @contextmanager
    def workers(self, count: int) -> Iterator[list[subprocess.Popen[str]]]:
        """`count` task workers, as `manage.py up` starts its one."""
        args = [
            sys.executable,
            str(PROJECT_ROOT / "manage.py"),
            "run_worker",
            "--verbosity",
            "0",
            "--",
            "--no-reload",
            "--no-startup-delay",
            "--interval",
            "0.5",
            "--verbosity",
            "0",
        ]
        with ExitStack() as stack:
            processes = []
            for index in range(count):
                process = _spawn(args, self.env(), self.data_dir / f"worker-{index}.log")
                stack.callback(stop, process)
                processes.append(process)
            yield processes


def _web_args(port: int) -> list[str]:
    """The web server, as `manage.py up` starts it."""
    return [
        sys.executable,
        "-m",
        "daphne",
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "--verbosity",
        "0",
        "detective_site.asgi:application",
    ]


def _spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    """Start a process; its output goes to `log` (in the site's data dir), for post-mortems."""
    with open(log, "a") as output:
        return subprocess.Popen(
            args,
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )


def _wait_http(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the web server exited ({process.returncode}) while starting")
        try:
            httpx.get(url, headers=secure_headers(url), timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise TimeoutError(f"the web server did not answer {url} within {READY_TIMEOUT_S:g} s")


def secure_headers(url: str) -> dict[str, str]:
    """What the TLS-terminating proxy adds: production settings redirect plain HTTP."""
    origin = "https://" + url.split("://", 1)[1].split("/", 1)[0]
    return {"X-Forwarded-Proto": "https", "Origin": origin, "Referer": origin + "/"}


def sqlite_files(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("*.sqlite3*"))


@dataclass
class Session:
    """A running site: its processes up, a driver to talk to it."""

    site: Site
    driver: Driver
    # The web server's resident memory once started, having served one page (MiB).
    web_idle_mb: float


def _start_session(stack: ExitStack, site: Site) -> Session:
    driver = stack.enter_context(site.running())
    assert site.web_process is not None
    httpx.get(f"{site.web_url}/accounts/login/", headers=secure_headers(site.web_url))
    time.sleep(0.5)
    return Session(site, driver, rss_mb(site.web_process.pid))


@contextmanager
def session(
    ctx: Context, name: str, *, redis: bool = False, keep: bool = False
) -> Iterator[Session]:
    """A site for one benchmark. With `--quick` the benchmarks share one embedded site
    (starting one costs seconds); `keep` leaves it running until the whole run ends (the
    page benchmark's site, which the memory benchmark measures)."""
    if ctx.quick and not redis:
        shared: Session | None = ctx.shared.get("session")
        if shared is None:
            shared = _start_session(ctx.stack, Site(ctx.scratch, "shared"))
            ctx.shared["session"] = shared
        yield shared
        return
    if keep:
        yield _start_session(ctx.stack, Site(ctx.scratch, name, redis=redis))
        return
    with ExitStack() as stack:
        yield _start_session(stack, Site(ctx.scratch, name, redis=redis))
