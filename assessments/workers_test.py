"""Worker ids and liveness: a worker on this machine is judged by its process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from assessments import workers


def test_a_worker_id_names_this_host_and_pid() -> None:
    assert workers.worker_id(123) == f"{workers.this_host()}:123"
    assert workers.pid_on_this_host(workers.worker_id(123)) == 123
    assert workers.pid_on_this_host("elsewhere:123") is None
    assert workers.pid_on_this_host("a-random-db-worker-id") is None
    assert len(workers.worker_id(4_194_304)) <= 64


def test_a_dead_process_is_gone_and_other_programs_do_not_count_as_workers() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert workers.gone(workers.worker_id(child.pid)) == child.pid
    # This test process lives but is no task worker: a reused pid is not mistaken for one.
    assert workers.gone(workers.worker_id(os.getpid())) == os.getpid()


def test_a_living_worker_is_not_gone() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", "run_worker"],
    )
    try:
        # Between fork and exec the child still reads as this test's program: wait for exec.
        cmdline = Path(f"/proc/{child.pid}/cmdline")
        deadline = time.monotonic() + 10
        while b"run_worker" not in cmdline.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert workers.gone(workers.worker_id(child.pid)) is None
        assert workers.gone("elsewhere:1") is None
    finally:
        child.kill()
        child.wait()
