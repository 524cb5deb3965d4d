"""Faults: the model's deadlines against a live site: a model server that never answers fails
the run at the first-byte deadline, and the whole assessment has a deadline of its own.

Figures each test measures are printed (`-s` shows them); docs/operating/reliability.md
quotes them.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

import pytest

from releases.models import Conversation, Release, RunStatus
from tests.live_site import LiveSite
from tests.llm_server import ScriptedLLM
from tests.up_site import release, status  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


class BlackHole:
    """A model server that accepts connections and never answers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self.listener.accept()
                self.connections.append(connection)  # held open, never read or answered

    def environment(self) -> dict[str, str]:
        return {
            "DETECTIVE_PROVIDER": "openai-compatible",
            "DETECTIVE_MODEL": "black-hole",
            "DETECTIVE_BASE_URL": f"http://127.0.0.1:{self.port}/v1",
        }

    def close(self) -> None:
        self.listener.close()
        for connection in self.connections:
            connection.close()


def _wait_finished(run: Conversation, timeout: float, site: LiveSite) -> float:
    started = time.monotonic()
    while status(run) in RunStatus.active():
        assert time.monotonic() - started < timeout, site.log_text()
        time.sleep(0.1)
    return time.monotonic() - started


def test_a_black_hole_model_server_fails_the_run_at_the_first_byte_deadline(
    tmp_path: Path,
    release: Release,  # noqa: F811
) -> None:
    from assessments import services, tasks

    hole = BlackHole()
    environment = {**hole.environment(), "DETECTIVE_MODEL_FIRST_BYTE_TIMEOUT": "2"}
    try:
        with LiveSite(tmp_path / "logs", environment) as live:
            run = services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
            took = _wait_finished(run, 60, live)
    finally:
        hole.close()
    print(f"\nblack-hole model server, first-byte deadline 2 s: the run failed after {took:.1f} s")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "sent no first byte within 2 s" in run.error
    assert "first-byte deadline; DETECTIVE_MODEL_FIRST_BYTE_TIMEOUT changes it" in run.error
    assert took < 20  # 3 attempts of 2 s and the back-off between them, not 366 s
    assert len(hole.connections) == 3  # every attempt reached it


def test_the_whole_assessment_has_a_deadline(
    tmp_path: Path,
    release: Release,  # noqa: F811
) -> None:
    from assessments import services, tasks

    with (
        ScriptedLLM(delay=0.05, narration=2000) as slow,
        LiveSite(tmp_path / "logs", {**slow.environment(), "DETECTIVE_RUN_DEADLINE": "10"}) as live,
    ):
        run = services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
        took = _wait_finished(run, 60, live)
    print(f"\nrun deadline 10 s against a 100 s answer: the run ended after {took:.1f} s")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error == (
        "The run was stopped: the assessment's deadline (10 s, DETECTIVE_RUN_DEADLINE) passed."
    )
    assert 9 < took < 20
    last = run.events.order_by("-seq").first()
    assert last.kind == "run_cancelled" and "DETECTIVE_RUN_DEADLINE" in last.payload["reason"]
