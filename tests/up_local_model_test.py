"""`manage.py up` with the local model installed and nothing else configured: it starts the
model server first, points the worker at it, and stops it with the rest.

A stand-in llama-server (a script answering /health) plays the installed one, so this runs
without the 1.1 GB download; tests/local_model_test.py covers the real server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from detective_site.config import BASE_DIR, EXPECTED
from local_model import serve
from local_model.paths import LocalModelPaths
from local_model.spec import MODEL
from local_model.testing import install_fake_server
from tests.up_command_test import children_of, free_port, running

# `up` on the embedded defaults, DATABASE_URL and REDIS_URL blanked: CI's second pass would
# repeat the first.
pytestmark = pytest.mark.backend_independent

START_TIMEOUT = 90


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    pairs = (item.decode(errors="replace").partition("=") for item in raw if item)
    return {name: value for name, _, value in pairs}


def cmdline_of(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="inspects processes through /proc")
def test_up_starts_the_local_model_first_and_stops_it_with_the_rest(tmp_path: Path) -> None:
    data = tmp_path / "data"
    paths = LocalModelPaths.for_data_dir(data)
    install_fake_server(paths)
    port = free_port()
    env = {**os.environ, **dict.fromkeys(EXPECTED, "")}
    for name in ("DETECTIVE_PROVIDER", "DETECTIVE_BASE_URL", "DETECTIVE_MODEL"):
        env[name] = ""
    env.update(
        DETECTIVE_DATA_DIR=str(data),
        DETECTIVE_ADMIN_PASSWORD="up-test-password",
        PYTHONUNBUFFERED="1",
    )
    log = tmp_path / "up.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, str(BASE_DIR / "manage.py"), "up", "--port", str(port)],
            cwd=BASE_DIR,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and process.poll() is None:
            if "Detective is running at" in log.read_text():
                break
            time.sleep(0.3)
        output_text = log.read_text()
        assert "Detective is running at" in output_text, output_text
        assert "Starting the local model" in output_text
        assert "No model is configured" not in output_text

        children = children_of(process.pid)
        servers = [pid for pid in children if str(paths.binary) in cmdline_of(pid)]
        assert len(servers) == 1, [cmdline_of(pid) for pid in children]
        (server,) = servers
        argv = cmdline_of(server)
        assert "--host 127.0.0.1" in argv and "--jinja" in argv
        model_port = int(argv.split("--port ", 1)[1].split()[0])
        assert serve.health(model_port) == "ok"

        workers = [pid for pid in children if "worker" in cmdline_of(pid)]
        assert workers, [cmdline_of(pid) for pid in children]
        worker_env = environ_of(workers[0])
        assert worker_env["DETECTIVE_PROVIDER"] == "local"
        assert worker_env["DETECTIVE_BASE_URL"] == f"http://127.0.0.1:{model_port}/v1"
        assert worker_env["DETECTIVE_MODEL"] == MODEL.alias

        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
        assert process.returncode == 0
        assert not [pid for pid in children if running(pid)]
        assert serve.health(model_port) == "down"
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
