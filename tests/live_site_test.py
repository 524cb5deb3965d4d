"""The live site's hold on its port (tests/live_site.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import live_site
from tests.live_site import HOST, LiveSite, owns_listening_port


@pytest.fixture
def listening() -> Iterator[int]:
    """A port this process listens on."""
    with socket.socket() as server:
        server.bind((HOST, 0))
        server.listen()
        yield int(server.getsockname()[1])


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")
def test_only_the_process_holding_the_listening_socket_owns_the_port(listening: int) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert owns_listening_port(os.getpid(), listening)
        assert not owns_listening_port(other.pid, listening)
    finally:
        other.kill()
        other.wait()
    assert not owns_listening_port(os.getpid(), live_site.free_port())


@pytest.mark.django_db(transaction=True)
def test_a_site_whose_port_was_taken_starts_on_another(
    listening: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first port it is given is taken (as another worker's site may take it), and answers.
    ports = iter([listening])
    free_port = live_site.free_port
    monkeypatch.setattr(live_site, "free_port", lambda: next(ports, None) or free_port())
    with LiveSite(tmp_path / "site", {}, workers=0) as site:
        assert site.port != listening
        assert site.url.endswith(f":{site.port}")
        assert site.environment["DETECTIVE_API_URL"] == site.url
        answer = httpx.get(f"{site.url}/accounts/login/", timeout=30)
        assert answer.status_code == 200
        assert owns_listening_port(site.processes[0].pid, site.port)
