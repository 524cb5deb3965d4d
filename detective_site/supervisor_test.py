from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from detective_site.supervisor import ChildNotReady, ChildSpec, Supervisor

SLEEPER = "import time; time.sleep(60)"
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)
# A child that starts a grandchild, which shares its process group.
PARENT_OF_GRANDCHILD = (
    "import subprocess, sys, time; "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "open(sys.argv[1], 'w').write(str(p.pid)); time.sleep(60)"
)


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; it only waits for its parent to collect it.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def wait_for(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_stop_terminates_every_child_and_its_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    supervisor = Supervisor(
        [
            ChildSpec("a", python(SLEEPER)),
            ChildSpec("b", python(PARENT_OF_GRANDCHILD, str(pid_file))),
        ],
        stop_timeout=5,
        log=lambda line: None,
    )
    supervisor.start()
    wait_for(lambda: pid_file.exists() and pid_file.read_text())
    grandchild = int(pid_file.read_text())
    children = [p.pid for p in supervisor.processes.values()]

    started = time.monotonic()
    supervisor.stop()
    assert time.monotonic() - started < 5
    assert all(p.returncode is not None for p in supervisor.processes.values())
    wait_for(lambda: not any(alive(pid) for pid in [*children, grandchild]), timeout=5)


def test_a_child_that_ignores_sigterm_is_killed_after_the_timeout() -> None:
    lines: list[str] = []
    supervisor = Supervisor(
        [ChildSpec("stubborn", python(STUBBORN))], stop_timeout=0.5, log=lines.append
    )
    supervisor.start()
    time.sleep(0.5)  # let it install its handler
    started = time.monotonic()
    supervisor.stop()
    assert time.monotonic() - started < 3
    assert supervisor.processes["stubborn"].returncode == -signal.SIGKILL
    assert lines == ["stubborn did not stop within 0.5 s; killing it."]


def test_run_returns_when_a_child_exits_on_its_own_and_stops_the_rest() -> None:
    lines: list[str] = []
    supervisor = Supervisor(
        [
            ChildSpec("sleeper", python(SLEEPER)),
            ChildSpec("crasher", python("raise SystemExit(3)")),
        ],
        log=lines.append,
    )
    assert supervisor.run() == 1
    assert lines == ["crasher exited unexpectedly with code 3; stopping the others."]
    assert supervisor.processes["sleeper"].returncode is not None


def test_run_stops_on_sigterm_and_reports_readiness_once() -> None:
    supervisor = Supervisor([ChildSpec("sleeper", python(SLEEPER))], log=lambda line: None)
    announcements: list[str] = []

    def ready() -> bool:
        return supervisor.processes["sleeper"].pid > 0

    def on_ready() -> None:
        announcements.append("ready")
        os.kill(os.getpid(), signal.SIGTERM)  # as if the user pressed Ctrl+C now

    previous = signal.getsignal(signal.SIGTERM)
    assert supervisor.run(ready=ready, on_ready=on_ready) == 0
    assert announcements == ["ready"]
    assert supervisor.stop_signal == signal.SIGTERM
    assert supervisor.processes["sleeper"].returncode is not None
    assert signal.getsignal(signal.SIGTERM) is previous


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_children_do_not_outlive_a_killed_supervisor(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = (
        "import sys, time; from detective_site.supervisor import ChildSpec, Supervisor; "
        "s = Supervisor([ChildSpec('c', [sys.executable, '-c', 'import time; time.sleep(60)'])]); "
        "s.start(); open(sys.argv[1], 'w').write(str(s.processes['c'].pid)); time.sleep(60)"
    )
    import subprocess

    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(pid_file)], cwd=Path(__file__).parent.parent
    )
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text())
        child = int(pid_file.read_text())
        assert alive(child)
        parent.kill()
        parent.wait()
        wait_for(lambda: not alive(child), timeout=5)
    finally:
        parent.kill()


def test_a_child_with_a_readiness_check_is_ready_before_the_next_starts(tmp_path: Path) -> None:
    marker = tmp_path / "ready"
    order: list[str] = []

    def first_ready() -> bool:
        if marker.exists():
            order.append("first ready")
            return True
        return False

    supervisor = Supervisor(
        [
            ChildSpec(
                "first",
                python(
                    "import sys, time; time.sleep(0.3); open(sys.argv[1], 'w'); time.sleep(60)",
                    str(marker),
                ),
                ready=first_ready,
            ),
            ChildSpec("second", python(SLEEPER)),
        ],
        log=lambda line: None,
    )
    try:
        supervisor.start()
        order.append("second started" if "second" in supervisor.processes else "not started")
    finally:
        supervisor.stop()
    assert order == ["first ready", "second started"]


def test_a_child_that_dies_before_it_is_ready_stops_the_start(tmp_path: Path) -> None:
    supervisor = Supervisor(
        [
            ChildSpec("server", python("raise SystemExit(3)"), ready=lambda: False),
            ChildSpec("worker", python(SLEEPER)),
        ],
        log=lambda line: None,
    )
    with pytest.raises(ChildNotReady, match="server exited with code 3"):
        supervisor.run()
    assert "worker" not in supervisor.processes


def test_a_child_that_is_never_ready_times_out_and_is_stopped() -> None:
    supervisor = Supervisor(
        [ChildSpec("server", python(SLEEPER), ready=lambda: False, ready_timeout=0.3)],
        log=lambda line: None,
    )
    with pytest.raises(ChildNotReady, match=r"not ready within 0\.3 s"):
        supervisor.run()
    assert not alive(supervisor.processes["server"].pid)


def test_a_child_output_can_go_to_a_file(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    supervisor = Supervisor(
        [ChildSpec("talker", python("print('hello from the child', flush=True)"), output=log)],
        log=lambda line: None,
    )
    supervisor.start()
    supervisor.processes["talker"].wait(timeout=10)
    supervisor.stop()
    assert log.read_text() == "hello from the child\n"
