"""Serving: llama-server's command line (loopback only, one slot, our chat template), its
health, a background server for `local_model serve | status | stop`, and when `up` starts one
of its own."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from local_model.paths import (
    LocalModelPaths,
    is_installed,
    model_installed,
    now,
    server_installed,
    write_json,
)
from local_model.spec import (
    DEFAULT_CONTEXT,
    DEFAULT_THREADS,
    HEALTH_TIMEOUT,
    INSTALL_HINT,
    MODEL,
    SETUP_GUIDANCE,
    STOP_TIMEOUT,
    ModelSpec,
    ServerError,
)
from local_model.steps import tail

CHAT_TEMPLATE = Path(__file__).with_name("chat_template.jinja")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def cpu_reports_amx(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Does the CPU claim Intel AMX (the `amx_tile` flag)? False where it cannot be read."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(
        line.startswith("flags") and "amx_tile" in line.split() for line in text.splitlines()
    )


def server_argv(
    paths: LocalModelPaths,
    port: int,
    *,
    context: int = DEFAULT_CONTEXT,
    threads: int = DEFAULT_THREADS,
    spec: ModelSpec = MODEL,
    amx: bool | None = None,
) -> list[str]:
    """The llama-server command line: loopback only, one slot, our chat template."""
    amx = cpu_reports_amx() if amx is None else amx
    return [
        str(paths.binary),
        "--model",
        str(paths.model(spec)),
        "--alias",
        spec.alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        # --jinja with our template: tool calls come back as tool_calls, not text.
        "--jinja",
        "--chat-template-file",
        str(CHAT_TEMPLATE),
        "--ctx-size",
        str(context),
        "--threads",
        str(threads),
        # One conversation at a time gets the whole context.
        "--parallel",
        "1",
        "--no-webui",
        # A virtual machine may report AMX without letting programs use it: the native build
        # then repacks the weights for AMX and dies of a general protection fault (SIGSEGV) on
        # its first `ldtilecfg`, while warming up (seen on a 2-vCPU cloud machine,
        # 2026-11-25). Without repacking the server uses its AVX-512 / AVX2 kernels.
        *(["--no-repack"] if amx else []),
    ]


def base_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"


def agent_environment(port: int, context: int = DEFAULT_CONTEXT) -> dict[str, str]:
    """What the agent needs to use a local server on `port` (OpenAI-compatible API)."""
    return {
        "DETECTIVE_PROVIDER": "local",
        "DETECTIVE_BASE_URL": base_url(port),
        "DETECTIVE_MODEL": MODEL.alias,
        "DETECTIVE_CONTEXT_WINDOW": str(context),
    }


def health(port: int, timeout: float = 2.0) -> str:
    """ "ok", "loading" (the server answers 503 while it loads the model) or "down"."""
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=timeout)
    except httpx.HTTPError:
        return "down"
    if response.status_code == 200:
        return "ok"
    return "loading" if response.status_code == 503 else "down"


def wait_until_healthy(
    port: int,
    *,
    alive: Callable[[], bool],
    log: Path | None = None,
    timeout: float = HEALTH_TIMEOUT,
    interval: float = 0.25,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if health(port) == "ok":
            return
        if not alive():
            where = f" Its log, {log}, ends with:\n{tail(log)}" if log else ""
            raise ServerError(f"llama-server exited before it was ready.{where}")
        time.sleep(interval)
    raise ServerError(
        f"llama-server was not healthy within {timeout:g} s"
        + (f"; see its log, {log}" if log else "")
    )


def require_installed(paths: LocalModelPaths) -> None:
    if not server_installed(paths) or not model_installed(paths):
        raise ServerError(
            f"The local model is not installed in {paths.root}. Install it with `{INSTALL_HINT}`."
        )


# -- a background server for `local_model serve | status | stop` --


@dataclass(frozen=True)
class RunningServer:
    pid: int
    port: int
    started_at: str

    @property
    def url(self) -> str:
        return base_url(self.port)


def _is_our_server(pid: int, binary: Path) -> bool:
    """The pid is alive and runs our llama-server (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        return False
    # argv[0], or argv[1] when an interpreter runs it (a script with a #! line).
    return str(binary).encode() in cmdline[:2]


def running_server(paths: LocalModelPaths) -> RunningServer | None:
    """The server `serve` started, if it still runs."""
    try:
        data = json.loads(paths.pid_file.read_text(encoding="utf-8"))
        server = RunningServer(int(data["pid"]), int(data["port"]), str(data["started_at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return server if _is_our_server(server.pid, paths.binary) else None


def start_background_server(
    paths: LocalModelPaths,
    *,
    port: int | None = None,
    context: int = DEFAULT_CONTEXT,
    threads: int = DEFAULT_THREADS,
    timeout: float = HEALTH_TIMEOUT,
) -> RunningServer:
    """Start llama-server detached from this process, wait until it is healthy, and write
    the pid file. Returns the running one if `serve` already started it."""
    require_installed(paths)
    if existing := running_server(paths):
        return existing
    port = port or free_port()
    paths.logs_dir.mkdir(parents=True, exist_ok=True)
    with paths.server_log.open("ab") as log:
        log.write(f"\n# llama-server on 127.0.0.1:{port}, {now()}\n".encode())
        process = subprocess.Popen(
            server_argv(paths, port, context=context, threads=threads),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this command, and a Ctrl+C in its terminal
        )
    server = RunningServer(process.pid, port, now())
    write_json(paths.pid_file, {"pid": server.pid, "port": port, "started_at": server.started_at})
    try:
        wait_until_healthy(
            port, alive=lambda: process.poll() is None, log=paths.server_log, timeout=timeout
        )
    except BaseException:
        _terminate(process.pid, STOP_TIMEOUT)
        paths.pid_file.unlink(missing_ok=True)
        raise
    return server


def stop_background_server(paths: LocalModelPaths, timeout: float = STOP_TIMEOUT) -> bool:
    """Stop the server `serve` started; False when none was running."""
    server = running_server(paths)
    paths_pid = paths.pid_file
    if server is None:
        paths_pid.unlink(missing_ok=True)
        return False
    _terminate(server.pid, timeout)
    paths_pid.unlink(missing_ok=True)
    return True


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _terminate(pid: int, timeout: float) -> None:
    """SIGTERM the server's process group, SIGKILL it after `timeout`."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not _alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# ---- when `up` starts one -------------------------------------------------------------------


@dataclass(frozen=True)
class UpPlan:
    """What `up` does about the model: `start` a local server, or not; `guidance` to print."""

    start_local: bool
    guidance: str | None = None


def plan_for_up(
    paths: LocalModelPaths, *, provider: str | None, base_url: str | None, hosted_key: bool
) -> UpPlan:
    """Start the local model when it is asked for (DETECTIVE_PROVIDER=local without a URL of
    one's own) or when nothing else is configured and it is installed."""
    provider = (provider or "").strip().lower()
    installed = is_installed(paths)
    if provider == "local":
        if base_url:
            return UpPlan(start_local=False)  # a llama-server of the user's own
        if not installed:
            return UpPlan(
                start_local=False,
                guidance=(
                    "DETECTIVE_PROVIDER=local, but the local model is not installed in "
                    f"{paths.root}. Install it with `{INSTALL_HINT}`, then start "
                    "`uv run manage.py up` again; until then assessments fail."
                ),
            )
        return UpPlan(start_local=True)
    if provider or hosted_key:
        return UpPlan(start_local=False)
    if installed:
        return UpPlan(start_local=True)
    return UpPlan(start_local=False, guidance=SETUP_GUIDANCE)
