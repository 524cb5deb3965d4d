"""Faults (issue 37, item 11): `kill -9` of `up` leaves no orphan.

`up` cannot stop its children when it is killed outright, so each child asks the kernel for
SIGTERM when `up` dies (PR_SET_PDEATHSIG, `detective_site/supervisor.py`). The web server and
the task worker, mid-run, must then be gone within seconds, and the run in flight ends as
stopped with the site instead of going on in a worker nobody supervises.

The worker stops its run at SIGTERM; a run inside a tool call used to wait for the tool first,
and the tool, finding the web server gone with `up`, asked again until its deadline (25 s and
more: the issue's "still running the run 23 s later"). The cancel now lands inside the tool
call (`agent.cancel.unless_cancelled`).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from releases.models import AgentEvent, Conversation, Release, RunStatus
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
# Well under the release tools' deadline (2 x 10 s + 5 s), which an orphan used to wait out.
GONE_MID_TOOL_WITHIN_S = 8


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


def _web_pid(site: Up) -> int | None:
    found = [p for p, cmd in _children(site.process.pid).items() if b"web_server" in cmd]
    return found[0] if len(found) == 1 else None


def _kill_9_and_wait(
    site: Up, children: dict[int, bytes], within: float
) -> tuple[float, dict[int, bytes]]:
    """kill -9 of up; how long its processes took to go, and those left after `within`."""
    site.process.send_signal(signal.SIGKILL)
    site.process.wait()
    killed_at = time.monotonic()
    try:
        while [pid for pid in children if _alive(pid)] and time.monotonic() - killed_at < within:
            time.sleep(0.1)
        gone_after = time.monotonic() - killed_at
        left = {pid: children[pid] for pid in children if _alive(pid)}
    finally:
        for pid in children:  # whatever outlived the test, so that it does not outlive CI
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    return gone_after, left


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

    gone_after, left = _kill_9_and_wait(up, children, GONE_WITHIN_S)
    ended = Conversation.objects.get(pk=run.pk)
    print(
        f"\nkill -9 of up: its {len(children)} processes gone after {gone_after:.1f} s; "
        f"the run {ended.status}: {ended.error}"
    )
    assert left == {}, f"orphans {left}:\n{up.text()[-3000:]}"
    # The worker stopped the run on its way out: it is not left running for nobody.
    assert ended.status == RunStatus.CANCELLED, up.text()[-3000:]
    assert "stopped with the site" in ended.error


def test_kill_9_of_up_mid_tool_call_does_not_leave_the_worker_waiting_for_the_tool(
    up: Up,  # noqa: F811
    llm: ScriptedLLM,  # noqa: F811
    manager: User,  # noqa: F811
    release: Release,  # noqa: F811
) -> None:
    llm.configure(narration=40)  # about a second of words, then the summary's tool call
    run = reassess(browser(up, manager), release)
    up.wait_until(streaming(run), 60, "the run to stream")
    # The web server down (up restarts it after 1 s and a cold start of seconds): the tool
    # call the model makes meanwhile asks again and again.
    web = _web_pid(up)
    assert web is not None
    os.kill(web, signal.SIGKILL)
    calls = AgentEvent.objects.filter(conversation=run, kind="tool_call")
    results = AgentEvent.objects.filter(conversation=run, kind="tool_result")
    up.wait_until(calls.exists, 30, "the summary's tool call")
    assert not results.exists(), "the tool answered before up was killed: nothing to test"
    children = _descendants(up.process.pid)
    assert any(b"run_worker" in cmd for cmd in children.values()), children

    gone_after, left = _kill_9_and_wait(up, children, GONE_MID_TOOL_WITHIN_S)
    ended = Conversation.objects.get(pk=run.pk)
    print(
        f"\nkill -9 of up mid-tool: its {len(children)} processes gone after "
        f"{gone_after:.1f} s; the run {ended.status}: {ended.error}"
    )
    assert left == {}, f"orphans {left}:\n{up.text()[-3000:]}"
    assert not results.exists()  # stopped inside the call, not after it gave up
    assert ended.status == RunStatus.CANCELLED, up.text()[-3000:]
    assert "stopped with the site" in ended.error
