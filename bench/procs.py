"""Processes the benchmarks start (the model server, a web server, a worker) and their memory.

Every process started here is stopped by its own id (SIGTERM, then SIGKILL after a grace
period), never by name; waiting for one to come up has a deadline.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
STOP_GRACE_S = 5.0


def wait_for_line(
    process: subprocess.Popen[str], prefix: str, timeout_s: float
) -> tuple[str, list[str]]:
    """Read the process's stdout until a line starts with `prefix`; return that line and
    the lines before it. Raises if the process exits or the deadline passes first."""
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"{process.args!r} did not print {prefix!r} within {timeout_s:g} s; "
                    f"it printed: {' / '.join(seen[-5:])}"
                )
            if not selector.select(left):
                continue
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(
                    f"{process.args!r} exited ({process.wait()}) before printing {prefix!r}; "
                    f"it printed: {' / '.join(seen[-5:])}"
                )
            line = line.rstrip("\n")
            if line.startswith(prefix):
                return line, seen
            seen.append(line)


def stop(process: subprocess.Popen[str], grace_s: float = STOP_GRACE_S) -> None:
    """Stop a process this module started (and its process group): TERM, then KILL."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace_s)


@contextmanager
def started(
    args: list[str],
    *,
    ready: str,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start `args` in its own process group, wait for a stdout line starting with `ready`,
    yield the process and that line, and stop it on the way out."""
    process = subprocess.Popen(
        args,
        cwd=PROJECT_ROOT,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        line, _ = wait_for_line(process, ready, timeout_s)
        yield process, line
    finally:
        stop(process)
        if process.stdout is not None:
            process.stdout.close()


@contextmanager
def model_server(timeout_s: float = 20.0) -> Iterator[str]:
    """The scripted model server and release API in a process of its own: its base URL."""
    args = [sys.executable, "-m", "bench.llm_server", "--port", "0"]
    with started(args, ready="PORT ", timeout_s=timeout_s) as (_process, line):
        yield f"http://127.0.0.1:{int(line.split()[1])}"


def rss_mb(pid: int | None = None) -> float:
    """Resident memory of a process (this one by default), in MiB, from /proc."""
    return _status_kib(pid, "VmRSS") / 1024


def peak_rss_mb(pid: int | None = None) -> float:
    """The process's high-water mark of resident memory, in MiB."""
    return _status_kib(pid, "VmHWM") / 1024


def _status_kib(pid: int | None, field: str) -> int:
    path = Path(f"/proc/{pid or 'self'}/status")
    for line in path.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{path} has no {field}")
