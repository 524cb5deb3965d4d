"""Faults (issue 37, item 11): `kill -9` of `up` leaves no orphan.

`up` cannot stop its children when it is killed outright, so each child asks the kernel for
SIGTERM when `up` dies (PR_SET_PDEATHSIG, `detective_site/supervisor.py`). The web server and
the task worker, mid-run, must then be gone within seconds, and the run in flight ends as
stopped with the site instead of going on in a worker nobody supervises.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from releases.models import Conversation, Release, RunStatus
from tests.llm_server import ScriptedLLM
from tests.up_site import (  # noqa: F401  (up and the fixtures it needs)
    Up,
    _children,
    browser,
    llm,
    manager,
    reassess,
    release,
    status,
    streaming,
    up,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="inspects processes through /proc"),
]
GONE_WITHIN_S = 20


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _descendants(pid: int) -> dict[int, bytes]:
    """Children, grandchildren ...: whatever the web server or the worker started too."""
    found = _children(pid)
    for child in list(found):
        found |= _descendants(child)
    return found


def test_kill_9_of_up_takes_the_web_server_and_the_worker_with_it(
    up: Up,  # noqa: F811
    llm: ScriptedLLM,  # noqa: F811
    manager: User,  # noqa: F811
    release: Release,  # noqa: F811
) -> None:
    llm.configure(narration=600)  # a run long enough to be mid-stream when up dies
    run = reassess(browser(up, manager), release)
    up.wait_until(streaming(run), 60, "the run to stream")
    children = _descendants(up.process.pid)
    names = dict(children)
    assert any(b"run_worker" in cmd for cmd in names.values()), names
    assert any(b"detective_site.web_server" in cmd for cmd in names.values()), names

    up.process.send_signal(signal.SIGKILL)
    up.process.wait()
    killed_at = time.monotonic()
    try:
        while [pid for pid in children if _alive(pid)] and (
            time.monotonic() - killed_at < GONE_WITHIN_S
        ):
            time.sleep(0.1)
        gone_after = time.monotonic() - killed_at
        left = {pid: names[pid] for pid in children if _alive(pid)}
    finally:
        for pid in children:  # whatever outlived the test, so that it does not outlive CI
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    ended = Conversation.objects.get(pk=run.pk)
    print(
        f"\nkill -9 of up: its {len(children)} processes gone after {gone_after:.1f} s; "
        f"the run {ended.status}: {ended.error}"
    )
    assert left == {}, f"orphans {left}:\n{up.text()[-3000:]}"
    # The worker stopped the run on its way out: it is not left running for nobody.
    assert ended.status == RunStatus.CANCELLED, up.text()[-3000:]
    assert "stopped with the site" in ended.error
