"""Which task worker runs a task, and whether it still lives.

Each worker started by `manage.py run_worker` names itself `<host>:<pid>` (its db_worker id,
recorded on the task row it claims). A run whose worker was on this machine and whose process
is gone was stranded (kill -9, a crash, the machine's OOM killer): it can be failed at once,
without waiting for its heartbeat to go stale. Workers elsewhere are judged by heartbeat only.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

HOST_CHARS = 40  # db_worker ids are at most 64 characters
WORKER_COMMANDS = (b"run_worker", b"db_worker")


def this_host() -> str:
    return socket.gethostname()[:HOST_CHARS]


def worker_id(pid: int | None = None) -> str:
    """This process's worker id: `<host>:<pid>`."""
    return f"{this_host()}:{pid if pid is not None else os.getpid()}"


def pid_on_this_host(worker: str) -> int | None:
    """The pid in a worker id of this machine, or None (another machine, another format)."""
    host, _, pid = worker.rpartition(":")
    if host != this_host() or not pid.isdigit():
        return None
    return int(pid)


def is_alive(pid: int) -> bool:
    """Whether a task worker with this pid runs here (a reused pid of another program does
    not count, where /proc tells)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path(f"/proc/{pid}")
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = (proc / "cmdline").read_bytes()
    except (OSError, IndexError):
        return True  # no /proc to ask: the signal said it exists
    return state != "Z" and any(command in cmdline for command in WORKER_COMMANDS)


def gone(worker: str) -> int | None:
    """The pid of this machine's worker `worker` when it no longer runs, else None."""
    pid = pid_on_this_host(worker)
    if pid is None or is_alive(pid):
        return None
    return pid
