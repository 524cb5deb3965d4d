"""Faults (issue 22, item 6): every process that runs an assessment ends its run when stopped.

`manage.py assess` stopped by SIGTERM (a CI job's timeout) left its run "running" until a
sweep found it. Now SIGTERM and SIGINT cancel the run at once, as under `up`, and the command
exits non-zero saying so. A real subprocess, a scripted model server streaming slowly.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from detective_site.config import BASE_DIR
from releases.models import AgentEvent, Conversation, Release, RunStatus
from tests.live_site import subprocess_environment
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)


def _interruptible() -> None:
    # A command started in the background by a non-interactive shell (a CI script's `... &`)
    # inherits SIGINT ignored, and Python then installs no KeyboardInterrupt for it: the child
    # gets SIGINT as a terminal's Ctrl+C would give it, whoever started the tests.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_assess_cancels_its_run_when_stopped(
    signum: signal.Signals, make_release: Callable[..., Release]
) -> None:
    release = make_release(f"v-stop-{signum.name.lower()}")
    with ScriptedLLM(delay=0.05, narration=600) as llm:
        process = subprocess.Popen(
            [sys.executable, str(BASE_DIR / "manage.py"), "assess", release.version],
            cwd=BASE_DIR,
            env=subprocess_environment(llm.environment()),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=_interruptible,
        )
        try:
            _wait(
                lambda: AgentEvent.objects.filter(
                    conversation__release=release, kind="text_delta"
                ).exists(),
                60,
                "the run to stream",
            )
            stopped = time.monotonic()
            process.send_signal(signum)
            out, _ = process.communicate(timeout=15)
            took = time.monotonic() - stopped
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode != 0
    run = Conversation.objects.get(release=release)
    assert run.status == RunStatus.CANCELLED, (run.status, run.error, out[-2000:])
    assert "stopped" in run.error
    assert "No report was filed (the run cancelled)" in out
    kinds = list(run.events.order_by("seq").values_list("kind", flat=True))
    assert kinds[-1] == "run_cancelled"
    print(f"\nassess, {signum.name}: run cancelled, process gone {took:.2f} s after the signal")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_run_evals_cancels_its_run_when_stopped(signum: signal.Signals) -> None:
    from evals.models import EvalRun

    with ScriptedLLM(delay=0.05, narration=600) as llm:
        process = subprocess.Popen(
            [
                sys.executable,
                str(BASE_DIR / "manage.py"),
                "run_evals",
                "--trials=1",
                "--scenarios=boundary_*",
                "--provider=openai-compatible",
                "--model=scripted",
                f"--base-url={llm.base_url}",
            ],
            cwd=BASE_DIR,
            env=subprocess_environment(llm.environment()),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=_interruptible,
        )
        try:
            _wait(lambda: EvalRun.objects.exists() and bool(llm.requests), 90, "a trial")
            stopped = time.monotonic()
            process.send_signal(signum)
            out, _ = process.communicate(timeout=30)
            took = time.monotonic() - stopped
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode != 0
    run = EvalRun.objects.get()
    assert run.status == RunStatus.CANCELLED, (run.status, run.error, out[-2000:])
    assert run.finished_at is not None and "stopped by a signal" in run.error
    assert "the run is cancelled" in out
    print(f"\nrun_evals, {signum.name}: run cancelled, process gone {took:.2f} s after the signal")
