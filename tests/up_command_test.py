"""`manage.py up` for real: it serves the login page, and Ctrl+C stops everything it started."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from detective_site.config import BASE_DIR, EXPECTED

START_TIMEOUT = 90  # migrations on a fresh database, on a busy 2-core machine
STOP_TIMEOUT = 10


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def children_of(pid: int) -> list[int]:
    """Direct children of a process, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may contain spaces, so split after the last ")".
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid:
            found.append(int(entry.name))
    return found


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    port = free_port()
    # Embedded defaults only: never migrate or seed a database named in the environment or in
    # a .env file (an empty variable overrides .env and means "unset").
    env = {**os.environ, **dict.fromkeys(EXPECTED, "")}
    env.update(
        DETECTIVE_DATA_DIR=str(tmp_path / "data"),
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
        yield process, f"http://127.0.0.1:{port}", log
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="inspects processes through /proc")
def test_up_serves_the_site_and_stops_cleanly_on_ctrl_c(
    up: tuple[subprocess.Popen[bytes], str, Path],
) -> None:
    process, base_url, log = up
    deadline = time.monotonic() + START_TIMEOUT
    login = None
    while time.monotonic() < deadline and process.poll() is None:
        try:
            login = httpx.get(f"{base_url}/accounts/login/", timeout=2)
            break
        except httpx.TransportError:
            time.sleep(0.3)
    assert login is not None, f"no answer in {START_TIMEOUT} s:\n{log.read_text()}"
    assert login.status_code == 200
    assert "Sign in" in login.text
    # Safe by default: DEBUG off (the site's 404 page, not Django's list of every URL), plain
    # HTTP on the address given (no redirect to https), private data files.
    missing = httpx.get(f"{base_url}/no/such/page/", timeout=5)
    assert missing.status_code == 404
    assert "Page not found" in missing.text and "URLconf" not in missing.text
    assert httpx.get(f"{base_url}/", headers={"Host": "evil.example"}, timeout=5).status_code == 400
    data = log.parent / "data"
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    for name in ("detective.sqlite3", "detective.sqlite3-wal", "channels.sqlite3", "secret_key"):
        assert stat.S_IMODE((data / name).stat().st_mode) == 0o600, name

    with httpx.Client(base_url=base_url, timeout=10) as client:
        client.get("/accounts/login/")
        answer = client.post(
            "/accounts/login/",
            data={
                "username": "admin",
                "password": "up-test-password",
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
                "next": "/releases/",
            },
        )
        assert answer.status_code == 302
        releases = client.get("/releases/")
        assert releases.status_code == 200
        assert "v2.1.0" in releases.text  # seeded on first start
        assert client.get("/static/css/detective.css").status_code == 200

    children = children_of(process.pid)
    assert len(children) == 2  # the web server and the worker
    assert all(running(pid) for pid in children)

    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    process.wait(timeout=STOP_TIMEOUT)
    assert time.monotonic() - started < STOP_TIMEOUT
    assert process.returncode == 0
    assert not [pid for pid in children if running(pid)]
    output = log.read_text()
    assert "Detective is running at" in output
    assert "Stopped." in output
