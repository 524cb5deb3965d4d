"""`manage.py run_worker`: the task worker, and the sweep that fails runs whose worker died.

django-tasks' `db_worker` runs the tasks (assessments); alongside it a thread marks failed,
with the reason, every run whose heartbeat stopped (`services.fail_stale_runs`), every
`--sweep-every` seconds: a worker killed mid-run never leaves its run "running". Several
workers may run at once (the sweep's updates are conditional, so they never clash). Arguments
after `--` go to db_worker.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections, connection

from releases import runner, services, workers
from releases.runner.process import (
    configure_process_telemetry,
    flush_telemetry,
    freeze_startup_heap,
)

logger = logging.getLogger("releases.worker")


def sweep_forever(every: float, stop: threading.Event) -> None:
    while not stop.wait(every):
        try:
            close_old_connections()
            for run in services.fail_stale_runs():
                logger.warning("marked run %s failed: %s", run.pk, run.error or "stale")
        except Exception:
            logger.exception("the stale-run sweep failed; trying again")
    connection.close()


class Command(BaseCommand):
    help = "Run background tasks (db_worker) and fail runs whose worker stopped responding."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--sweep-every",
            type=float,
            default=5.0,
            help="Seconds between two looks for runs whose worker died (default: 5).",
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
            call_command("db_worker", *db_worker_args)
        finally:
            stop.set()
            flush_telemetry()
