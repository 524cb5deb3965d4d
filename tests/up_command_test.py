"""`manage.py up` for real: it serves the login page, and Ctrl+C stops everything it started."""

from __future__ import annotations

import os
import shutil
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

# Every test here runs `up` (or a command) on the embedded defaults or on a URL it makes up,
# with DATABASE_URL and REDIS_URL blanked: CI's second pass would repeat the first.
pytestmark = pytest.mark.backend_independent

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


def run_up(tmp_path: Path, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **dict.fromkeys(EXPECTED, "")}
    env.update({"DETECTIVE_DATA_DIR": str(tmp_path / "data"), **variables})
    return subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), "up", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def closed_port() -> int:
    return free_port()  # nothing listens there once the probe is closed


@pytest.mark.parametrize(
    ("variables", "names"),
    [
        (
            {"DATABASE_URL": "postgres://u:secret-pw@127.0.0.1:{port}/x"},
            ["Cannot reach the database at 127.0.0.1:{port}", "check DATABASE_URL"],
        ),
        (
            {"REDIS_URL": "redis://:secret-pw@127.0.0.1:{port}/0"},
            ["Cannot reach Redis at 127.0.0.1:{port}", "check REDIS_URL"],
        ),
        (
            {"DATABASE_URL": "mysql2://x"},
            ["DATABASE_URL: unsupported URL scheme 'mysql2'"],
        ),
    ],
    ids=["database-down", "redis-down", "bad-url"],
)
def test_start_up_errors_are_one_message_naming_the_variable(
    tmp_path: Path, variables: dict[str, str], names: list[str]
) -> None:
    port = closed_port()
    result = run_up(
        tmp_path,
        "--port",
        str(free_port()),
        **{name: value.format(port=port) for name, value in variables.items()},
    )
    assert result.returncode != 0
    for name in names:
        assert name.format(port=port) in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert "secret-pw" not in result.stderr + result.stdout
    assert len(result.stderr.strip().splitlines()) <= 2, result.stderr


def test_a_port_in_use_is_one_line_naming_the_option(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_up(tmp_path, "--port", str(port))
    assert result.returncode != 0
    assert f"127.0.0.1:{port} is already in use; choose another with --port" in result.stderr
    assert "Traceback" not in result.stderr


def test_verbose_adds_the_traceback(tmp_path: Path) -> None:
    port = closed_port()
    result = run_up(tmp_path, "--verbose", DATABASE_URL=f"postgres://u@127.0.0.1:{port}/x")
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "Cannot reach the database" in result.stderr


def test_other_commands_say_so_in_one_line_when_the_database_does_not_answer(
    tmp_path: Path,
) -> None:
    env = {**os.environ, **dict.fromkeys(EXPECTED, "")}
    env.update(
        DETECTIVE_DATA_DIR=str(tmp_path / "data"),
        DATABASE_URL=f"postgres://u:secret-pw@127.0.0.1:{closed_port()}/x",
    )
    result = subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), "run_worker"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "error: the database did not answer" in result.stderr
    assert "check DATABASE_URL" in result.stderr
    assert "Traceback" not in result.stderr and "secret-pw" not in result.stderr


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="inspects processes through /proc")
@pytest.mark.skipif(shutil.which("uv") is None, reason="starts up as the README does, with uv")
def test_kill_9_of_uv_run_stops_up_and_its_children(tmp_path: Path) -> None:
    """`uv run manage.py up`, as the README starts it: uv is up's parent and forwards Ctrl+C,
    but a kill -9 of uv would leave up serving with nobody to stop it. up watches its launcher
    and stops everything once it is gone (issue 37, item 11)."""
    port = free_port()
    env = {**os.environ, **dict.fromkeys(EXPECTED, "")}
    env.pop("VIRTUAL_ENV", None)
    env.update(
        DETECTIVE_DATA_DIR=str(tmp_path / "data"),
        DETECTIVE_ADMIN_PASSWORD="up-test-password",
        PYTHONUNBUFFERED="1",
    )
    log = tmp_path / "up.log"
    with log.open("wb") as output:
        launcher = subprocess.Popen(
            ["uv", "run", "--no-sync", "manage.py", "up", "--port", str(port)],
            cwd=BASE_DIR,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    processes: list[int] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while "Detective is running at" not in log.read_text() and time.monotonic() < deadline:
            assert launcher.poll() is None, log.read_text()
            time.sleep(0.2)
        [up] = children_of(launcher.pid)
        processes = [up, *children_of(up)]
        assert len(processes) == 3, log.read_text()  # up, the web server, the worker

        launcher.kill()
        launcher.wait()
        killed_at = time.monotonic()
        while any(running(pid) for pid in processes) and time.monotonic() - killed_at < 20:
            time.sleep(0.1)
        gone_after = time.monotonic() - killed_at
        left = [pid for pid in processes if running(pid)]
    finally:
        for pid in processes:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    print(f"\nkill -9 of uv: up and its 2 children gone after {gone_after:.1f} s")
    assert left == [], log.read_text()
    output = log.read_text()
    assert "is gone; stopping" in output and "Stopped." in output
