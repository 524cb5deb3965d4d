"""`manage.py run_worker`: the task worker, and the sweep that fails runs whose worker died.

django-tasks' `db_worker` runs the tasks (assessments); alongside it a thread marks failed,
with the reason, every run whose heartbeat stopped (`services.fail_stale_runs`), every
`--sweep-every` seconds: a worker killed mid-run never leaves its run "running". Several
workers may run at once (the sweep's updates are conditional, so they never clash). Arguments
after `--` go to db_worker.

A database that stops answering (a PostgreSQL restart, a failover) no longer ends the worker:
db_worker is started again after a back-off while the outage lasts, for at most
`--database-wait` seconds (one warning, not a traceback per try); past that the worker exits
as before, and `up` restarts it.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from assessments import runner, services, workers
from assessments.layer_health import describe
from assessments.runner.process import (
    configure_process_telemetry,
    flush_telemetry,
    freeze_startup_heap,
)

logger = logging.getLogger("releases.worker")


def sweep_forever(every: float, stop: threading.Event) -> None:
    database_down = False
    while not stop.wait(every):
        try:
            close_old_connections()
            for run in services.fail_stale_runs():
                logger.warning("marked run %s failed: %s", run.pk, run.error or "stale")
        except (OperationalError, InterfaceError) as error:
            # A database restarting: said once, not a traceback every few seconds.
            if not database_down:
                logger.warning("the stale-run sweep waits for the database (%s)", describe(error))
            database_down = True
            connection.close()
            continue
        except Exception:
            logger.exception("the stale-run sweep failed; trying again")
        database_down = False
    connection.close()


DATABASE_WAIT_SECONDS = 60.0
# An attempt that ran this long before the database failed starts a new outage.
NEW_OUTAGE_AFTER_SECONDS = 30.0


def run_through_database_outages(
    work: Callable[[], None],
    *,
    wait: float = DATABASE_WAIT_SECONDS,
    first_delay: float = 0.5,
    max_delay: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Call `work` (db_worker) and call it again after a back-off whenever it ends with the
    database not answering, until an outage has lasted `wait` seconds (then the error is
    raised) or a stop signal arrives while waiting."""
    outage_since: float | None = None
    delay = first_delay
    while True:
        started = clock()
        try:
            work()
            return
        except (OperationalError, InterfaceError) as error:
            now = clock()
            if outage_since is None or now - started > NEW_OUTAGE_AFTER_SECONDS:
                outage_since, delay = now, first_delay
                logger.warning(
                    "the database is not answering (%s: %s); the worker tries again for up to %g s",
                    type(error).__name__,
                    str(error).strip().splitlines()[0][:200] if str(error).strip() else "",
                    wait,
                )
            if now - outage_since >= wait:
                logger.error("the database did not come back within %g s; the worker exits", wait)
                raise
        connection.close()
        if _sleep_unless_stopped(delay):
            logger.warning("stopped while waiting for the database")
            return
        delay = min(delay * 2, max_delay)


def _sleep_unless_stopped(seconds: float) -> bool:
    """Sleep; True when SIGTERM or SIGINT came meanwhile (db_worker's own handlers are gone
    with it, so the worker listens here while it waits)."""
    stopped = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    if threading.current_thread() is not threading.main_thread():
        time.sleep(seconds)
        return False
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        stopped.wait(seconds)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return stopped.is_set()


class Command(BaseCommand):
    help = "Run background tasks (db_worker) and fail runs whose worker stopped responding."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--sweep-every",
            type=float,
            default=5.0,
            help="Seconds between two looks for runs whose worker died (default: 5).",
        )
        parser.add_argument(
            "--database-wait",
            type=float,
            default=DATABASE_WAIT_SECONDS,
            help="Seconds to wait for a database that stopped answering before exiting "
            f"(default: {DATABASE_WAIT_SECONDS:g}).",
        )
        parser.add_argument("db_worker_args", nargs="*", help="Arguments for db_worker.")

    def handle(self, *args: Any, **options: Any) -> None:
        configure_process_telemetry()
        # A run the previous worker left behind (killed, crashed) is resolved before this one
        # takes new work.
        for run in services.fail_orphaned_runs():
            logger.warning("marked run %s failed: %s", run.pk, run.error or "orphaned")
        runner.stop_runs_on_signals()
        db_worker_args = list(options["db_worker_args"])
        if not any(arg.startswith("--worker-id") for arg in db_worker_args):
            # <host>:<pid> on the task rows tells whether the worker of a run still lives.
            db_worker_args += ["--worker-id", workers.worker_id()]
        freeze_startup_heap()
        stop = threading.Event()
        sweeper = threading.Thread(
            target=sweep_forever, args=(options["sweep_every"], stop), daemon=True, name="sweep"
        )
        sweeper.start()
        try:
            run_through_database_outages(
                lambda: call_command("db_worker", *db_worker_args),
                wait=options["database_wait"],
            )
        finally:
            stop.set()
            flush_telemetry()
