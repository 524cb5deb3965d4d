from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from detective_site.supervisor import ChildNotReady, ChildSpec, Supervisor

SLEEPER = "import time; time.sleep(60)"
# Writes the file it is given once SIGTERM is ignored.
STUBBORN = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(sys.argv[1], 'w').write('ready'); time.sleep(60)"
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


def test_a_child_that_ignores_sigterm_is_killed_after_the_timeout(tmp_path: Path) -> None:
    lines: list[str] = []
    marker = tmp_path / "ignoring-sigterm"
    supervisor = Supervisor(
        [ChildSpec("stubborn", python(STUBBORN, str(marker)))],
        stop_timeout=0.5,
        log=lines.append,
    )
    supervisor.start()
    # Once its handler is in place (a fixed wait was too short on a loaded machine).
    wait_for(lambda: marker.exists() and marker.read_text() == "ready")
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


def test_a_restartable_child_that_dies_is_started_again_and_the_others_keep_running(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    starts = tmp_path / "starts"
    # Dies at once twice (quick crashes), then stays up.
    flaky = (
        "import sys, time; from pathlib import Path; p = Path(sys.argv[1]); "
        "n = len(p.read_text()) if p.exists() else 0; p.write_text('x' * (n + 1)); "
        "time.sleep(60) if n >= 2 else sys.exit(9)"
    )
    supervisor = Supervisor(
        [
            ChildSpec("sleeper", python(SLEEPER)),
            ChildSpec("worker", [*python(flaky), str(starts)], restart=True),
        ],
        log=lines.append,
        first_restart_delay=0.2,
    )
    supervisor.start()
    sleeper = supervisor.processes["sleeper"]
    result: list[int] = []
    waiter = threading.Thread(target=lambda: result.append(supervisor.wait()))
    waiter.start()
    try:
        wait_for(lambda: starts.exists() and len(starts.read_text()) == 3, timeout=10)
        time.sleep(0.3)
        assert supervisor.processes["worker"].poll() is None
        assert sleeper.poll() is None  # never stopped meanwhile
    finally:
        supervisor.request_stop(signal.SIGTERM)
        waiter.join(timeout=5)
        supervisor.stop()
    assert result == [0]
    restarts = [line for line in lines if "restarting it in" in line]
    assert restarts == [
        "worker exited unexpectedly with code 9; restarting it in 0.2 s (restart 1); "
        "the other processes keep running.",
        "worker exited unexpectedly with code 9; restarting it in 0.4 s (restart 2); "
        "the other processes keep running.",
    ]


def test_a_child_killed_by_a_signal_is_named_so() -> None:
    lines: list[str] = []
    supervisor = Supervisor(
        [ChildSpec("worker", python(SLEEPER), restart=True)],
        log=lines.append,
        first_restart_delay=30,
    )
    supervisor.start()
    first = supervisor.processes["worker"]
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert supervisor.exited_child() == ("worker", -signal.SIGKILL)
    assert supervisor._schedule_restart("worker", -signal.SIGKILL)
    assert lines[-1].startswith("worker was killed (SIGKILL); restarting it in 30 s")
    assert supervisor.exited_child() is None  # waiting for its restart, not exited again
    supervisor.stop()


def test_after_repeated_quick_crashes_the_supervisor_gives_up() -> None:
    lines: list[str] = []
    supervisor = Supervisor(
        [
            ChildSpec("sleeper", python(SLEEPER)),
            ChildSpec("crasher", python("raise SystemExit(3)"), restart=True),
        ],
        log=lines.append,
        first_restart_delay=0.05,
        max_quick_crashes=3,
    )
    assert supervisor.run() == 1
    assert len([line for line in lines if "restarting it in" in line]) == 3
    assert lines[-1] == (
        "crasher exited unexpectedly with code 3 4 times in a row, each within 30 s of "
        "starting; giving up and stopping the others."
    )
    assert supervisor.processes["sleeper"].returncode is not None


def test_a_childs_exit_is_reported_to_its_callback_before_the_restart() -> None:
    codes: list[int] = []
    lines: list[str] = []
    supervisor = Supervisor(
        [ChildSpec("worker", python("raise SystemExit(4)"), restart=True, on_exit=codes.append)],
        log=lines.append,
        first_restart_delay=0.05,
        max_quick_crashes=1,
    )
    assert supervisor.run() == 1
    assert codes == [4, 4]  # the first exit, then the one that made it give up


def test_a_failing_exit_callback_does_not_stop_the_supervisor() -> None:
    lines: list[str] = []

    def broken(code: int) -> None:
        raise RuntimeError("database gone")

    supervisor = Supervisor(
        [ChildSpec("worker", python("raise SystemExit(4)"), restart=True, on_exit=broken)],
        log=lines.append,
        first_restart_delay=0.05,
        max_quick_crashes=1,
    )
    assert supervisor.run() == 1
    assert "after worker exited, its clean-up failed: RuntimeError('database gone')" in lines


def test_a_watched_parent_that_is_gone_stops_the_supervisor_and_its_children(
    tmp_path: Path,
) -> None:
    """`uv run manage.py up` and kill -9 of uv: up (its child) stops everything it started.
    Here the watched "launcher" is a pid that is not the parent: gone, as far as it knows."""
    lines: list[str] = []
    supervisor = Supervisor(
        [ChildSpec("sleeper", python(SLEEPER))], log=lines.append, watch_parent=os.getppid() + 1
    )
    started = time.monotonic()
    assert supervisor.run() == 0
    assert time.monotonic() - started < 5
    [process] = supervisor.processes.values()
    assert not alive(process.pid)
    assert any("is gone; stopping" in line for line in lines)
