"""Run a few child processes together and stop all of them, and only them, cleanly.

Used by `manage.py up` (web server + task worker). Each child runs in its own process group,
so a stop signal reaches the child and anything it started, and a terminal's Ctrl+C reaches
only the supervisor, which then stops the children in order: SIGTERM to every group, a grace
period, then SIGKILL for whatever is left. On Linux the children also get SIGTERM if the
supervisor itself dies (PR_SET_PDEATHSIG), so they cannot outlive it as orphans. Children
start in order; one with a readiness check (the local model server) must be ready before the
next one starts.

With `watch_parent` (up started by `uv run`, which forwards Ctrl+C and SIGTERM but cannot
forward a kill -9 of itself), the supervisor also stops everything once that parent is gone,
rather than serving on with nobody to stop it.

A child marked `restart` (the web server, the task worker) that dies is started again after a
back-off (1 s, 2 s, 4 s ... up to 30 s) while the others go on; only after `max_quick_crashes`
crashes in a row, each within `quick_crash_seconds` of its start, does the supervisor give up
and stop everything. A child that ran longer before dying starts a new count.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

PR_SET_PDEATHSIG = 1
POLL_SECONDS = 0.1
FIRST_RESTART_DELAY = 1.0
MAX_RESTART_DELAY = 30.0
QUICK_CRASH_SECONDS = 30.0
MAX_QUICK_CRASHES = 5


@dataclass(frozen=True)
class ChildSpec:
    name: str
    argv: Sequence[str]
    # Children that others depend on (the local model server) say when they are ready; the
    # next child starts only then.
    ready: Callable[[], bool] | None = None
    ready_timeout: float = 120.0
    # A file for the child's output instead of the supervisor's terminal.
    output: Path | None = None
    # Start it again when it dies (the web server, the task worker); otherwise its exit
    # stops everything.
    restart: bool = False
    # Called with the exit code when it exits on its own (up fails the dead worker's run).
    on_exit: Callable[[int], None] | None = None


class ChildNotReady(RuntimeError):
    """A child with a readiness check exited or timed out before it was ready."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervisor:
    def __init__(
        self,
        children: Sequence[ChildSpec],
        *,
        stop_timeout: float = 5.0,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        log: Callable[[str], None] = print,
        first_restart_delay: float = FIRST_RESTART_DELAY,
        max_restart_delay: float = MAX_RESTART_DELAY,
        quick_crash_seconds: float = QUICK_CRASH_SECONDS,
        max_quick_crashes: int = MAX_QUICK_CRASHES,
        watch_parent: int | None = None,
    ) -> None:
        self.specs = list(children)
        self.watch_parent = watch_parent
        self.first_restart_delay = first_restart_delay
        self.max_restart_delay = max_restart_delay
        self.quick_crash_seconds = quick_crash_seconds
        self.max_quick_crashes = max_quick_crashes
        self.started_at: dict[str, float] = {}
        self.quick_crashes: dict[str, int] = {}
        self.restarts: dict[str, int] = {}
        # Children waiting to be started again, and when.
        self.restart_due: dict[str, float] = {}
        self.stop_timeout = stop_timeout
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.log = log
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.stop_signal: int | None = None

    # ---- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        for spec in self.specs:
            if self.stop_signal is not None:
                return
            self._spawn(spec)
            if spec.ready is not None:
                self._wait_until_ready(spec)

    def _spawn(self, spec: ChildSpec) -> None:
        output = spec.output.open("ab") if spec.output else None
        try:
            self.processes[spec.name] = subprocess.Popen(
                list(spec.argv),
                cwd=self.cwd,
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT if output else None,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            if output:
                output.close()
        self.started_at[spec.name] = time.monotonic()

    def _spec(self, name: str) -> ChildSpec:
        return next(spec for spec in self.specs if spec.name == name)

    def _schedule_restart(self, name: str, code: int) -> bool:
        """Plan a restart of a dead child; False when it crashed too often to try again."""
        lived = time.monotonic() - self.started_at.get(name, 0.0)
        quick = self.quick_crashes.get(name, 0) + 1 if lived < self.quick_crash_seconds else 1
        self.quick_crashes[name] = quick
        how = _exit_description(code)
        if quick > self.max_quick_crashes:
            self.log(
                f"{name} {how} {quick} times in a row, each within "
                f"{self.quick_crash_seconds:g} s of starting; giving up and stopping the others."
            )
            return False
        delay = min(self.first_restart_delay * 2 ** (quick - 1), self.max_restart_delay)
        self.restarts[name] = self.restarts.get(name, 0) + 1
        self.log(
            f"{name} {how}; restarting it in {delay:g} s (restart {self.restarts[name]}); "
            "the other processes keep running."
        )
        self.restart_due[name] = time.monotonic() + delay
        return True

    def _notify_exit(self, name: str, code: int) -> None:
        callback = self._spec(name).on_exit
        if callback is None:
            return
        try:
            callback(code)
        except Exception as exc:  # the supervisor goes on supervising
            self.log(f"after {name} exited, its clean-up failed: {exc!r}")

    def _restart_due_children(self) -> None:
        now = time.monotonic()
        for name, due in list(self.restart_due.items()):
            if due <= now:
                del self.restart_due[name]
                self._spawn(self._spec(name))
                self.log(f"{name} started again (pid {self.processes[name].pid}).")

    def _wait_until_ready(self, spec: ChildSpec) -> None:
        process = self.processes[spec.name]
        deadline = time.monotonic() + spec.ready_timeout
        while self.stop_signal is None and not spec.ready():
            if (code := process.poll()) is not None:
                raise ChildNotReady(f"{spec.name} exited with code {code} before it was ready.")
            if time.monotonic() > deadline:
                raise ChildNotReady(f"{spec.name} was not ready within {spec.ready_timeout:g} s.")
            time.sleep(POLL_SECONDS)

    def request_stop(self, signum: int, frame: FrameType | None = None) -> None:
        self.stop_signal = signum

    def exited_child(self) -> tuple[str, int] | None:
        """The first child that has exited, with its exit code, or None while all run."""
        for name, process in self.processes.items():
            if name in self.restart_due:
                continue
            code = process.poll()
            if code is not None:
                return name, code
        return None

    def wait(
        self, ready: Callable[[], bool] | None = None, on_ready: Callable[[], None] | None = None
    ) -> int:
        """Block until a stop is requested (0) or a child exits on its own (1); a child marked
        `restart` is started again instead, until it crashes too often.

        `on_ready` is called once, the first time `ready()` is true.
        """
        announced = ready is None
        while self.stop_signal is None:
            if self.watch_parent is not None and os.getppid() != self.watch_parent:
                self.log(f"The launcher that started this ({self.watch_parent}) is gone; stopping.")
                return 0
            if exited := self.exited_child():
                name, code = exited
                self._notify_exit(name, code)
                if not self._spec(name).restart:
                    how = _exit_description(code)
                    self.log(f"{name} {how}; stopping the others.")
                    return 1
                if not self._schedule_restart(name, code):
                    return 1
            self._restart_due_children()
            if not announced and ready is not None and ready():
                announced = True
                if on_ready is not None:
                    on_ready()
            time.sleep(POLL_SECONDS)
        return 0

    def stop(self) -> None:
        """SIGTERM every child's process group, then SIGKILL what is left after the timeout."""
        for process in self.processes.values():
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for name, process in self.processes.items():
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.log(f"{name} did not stop within {self.stop_timeout:g} s; killing it.")
                _signal_group(process, signal.SIGKILL)
                process.wait()
        # Anything a child started in its group and left behind goes too.
        for process in self.processes.values():
            _signal_group(process, signal.SIGKILL)

    def run(
        self, ready: Callable[[], bool] | None = None, on_ready: Callable[[], None] | None = None
    ) -> int:
        """Start the children, wait for SIGINT/SIGTERM or a child's exit, stop them all."""
        previous = {
            signum: signal.signal(signum, self.request_stop)
            for signum in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            self.start()
            return self.wait(ready, on_ready)
        finally:
            self.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _exit_description(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed ({name})"
    return f"exited unexpectedly with code {code}"


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    # The child leads its own group (start_new_session), so its pid is the group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)
