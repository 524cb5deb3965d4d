"""Faults against the real processes: `manage.py up` with a worker killed mid-run, stopped
mid-run, and started over a run a crash left running.

Figures each test measures are printed (`-s` shows them); docs/operating/reliability.md
quotes them. The hostile requests are in faults_hostile_test.py, the deadlines in
faults_deadline_test.py; `Up` and its fixtures in tests/up_site.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from releases.models import Conversation, Release, RunStatus
from tests.live_site import START_TIMEOUT
from tests.llm_server import ScriptedLLM
from tests.up_site import (  # noqa: F401  (up and the fixtures it needs)
    STOP_TIMEOUT,
    Prober,
    Up,
    _children,
    assert_no_event_lost,
    browser,
    llm,
    manager,
    reassess,
    release,
    status,
    streaming,
    up,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_killed_mid_run_is_restarted_the_site_serves_and_the_run_fails_at_once(
    up: Up,  # noqa: F811
    llm: ScriptedLLM,  # noqa: F811
    manager: User,  # noqa: F811
    release: Release,  # noqa: F811
) -> None:
    http = browser(up, manager)
    run = reassess(http, release)
    up.wait_until(streaming(run), 60, "the run to stream")
    killed = up.worker_pid()
    assert killed is not None

    with Prober(up.url) as prober:
        os.kill(killed, signal.SIGKILL)
        killed_at = time.monotonic()
        failed_after = up.wait_until(lambda: status(run) == RunStatus.FAILED, 30, "run failed")
        up.wait_until(lambda: up.worker_pid() not in (None, killed), 30, "a new worker")
        restarted_after = time.monotonic() - killed_at
        up.wait_until(lambda: up.text().count("Starting worker worker_id=") == 2, 30, "ready")

        # Reassess at once: the new worker takes it and finishes it.
        llm.configure(narration=0, delay=0)
        again = reassess(http, release)
        assert again.pk != run.pk
        up.wait_until(lambda: status(again) == RunStatus.SUCCEEDED, 60, "the new run")
    print(
        f"\nkill -9 of the worker: run failed after {failed_after:.1f} s, worker restarted after "
        f"{restarted_after:.1f} s; the web server answered {prober.ok} probes, "
        f"{len(prober.failures)} failed"
    )

    assert prober.failures == []  # the web server never stopped serving
    assert prober.ok > 10
    # up itself saw its worker die and failed the run, before the restart and long before
    # DETECTIVE_RUN_STALE_SECONDS (30 s).
    assert failed_after < 5
    assert f"Run {run.pk} failed" in up.text()
    run.refresh_from_db()
    assert f"The worker running it (pid {killed}) stopped" in run.error
    assert run.events.order_by("-seq").first().kind == "run_failed"
    assert_no_event_lost(run)
    task = DBTaskResult.objects.get(pk=run.task_id)
    assert task.status == "FAILED"  # the task row agrees
    assert "task worker was killed (SIGKILL); restarting it in 1 s (restart 1)" in up.text()
    page = http.get(f"/runs/{run.pk}/").text
    assert 'data-status="failed"' in page and f"pid {killed}" in page
    assert not Conversation.objects.filter(status__in=RunStatus.active()).exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stopping_up_mid_run_cancels_the_run_stopped_with_the_site(
    up: Up,  # noqa: F811
    manager: User,  # noqa: F811
    release: Release,  # noqa: F811
    signum: int,
) -> None:
    http = browser(up, manager)
    run = reassess(http, release)
    up.wait_until(streaming(run), 60, "the run to stream")
    worker = up.worker_pid()
    assert worker is not None

    started = time.monotonic()
    up.process.send_signal(signum)
    up.process.wait(timeout=STOP_TIMEOUT)
    stopped_after = time.monotonic() - started
    name = signal.Signals(signum).name
    print(f"\n{name} to up mid-run: everything stopped in {stopped_after:.1f} s")

    assert up.process.returncode == 0, up.text()
    assert "did not stop within" not in up.text()  # nothing had to be killed
    assert _children(up.process.pid) == {}
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED, (run.status, run.error, up.text())
    assert "stopped with the site" in run.error
    last = run.events.order_by("-seq").first()
    assert (last.kind, last.payload.get("reason")) == ("run_cancelled", "stopped with the site")
    assert_no_event_lost(run)
    task = DBTaskResult.objects.get(pk=run.task_id)
    assert task.status not in ("READY", "RUNNING")  # the task row agrees: it ended
    assert not Conversation.objects.filter(status__in=RunStatus.active()).exists()


def test_up_resolves_a_run_stranded_by_a_crash_before_anything_else(
    tmp_path: Path,
    release: Release,  # noqa: F811
    manager: User,  # noqa: F811
) -> None:
    """As after a power cut: the run is 'running', its worker (on this machine) long gone."""
    from assessments import services, tasks, workers

    run = services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    task = DBTaskResult.objects.create(
        task_path="assessments.tasks.assess_release",
        args_kwargs={"args": [str(run.pk)], "kwargs": {}},
        backend_name="default",
        queue_name="default",
        run_after=timezone.now(),
        status="RUNNING",
        worker_ids=[workers.worker_id(_dead_pid())],
    )
    Conversation.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, task_id=str(task.pk), heartbeat_at=timezone.now()
    )
    site = Up(tmp_path, {}, "--prepare-only")
    assert site.process.wait(timeout=START_TIMEOUT) == 0, site.text()
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "stopped: it was killed or crashed" in run.error
    assert f"Run {run.pk} was left running by a worker that is gone: failed." in site.text()
    assert DBTaskResult.objects.get(pk=task.pk).status == "FAILED"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
