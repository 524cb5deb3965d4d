"""`manage.py purge_traces [--days N]`: deletes the traces' per-minute figures older than the
retention (`DETECTIVE_TRACE_RETENTION_DAYS`, 90 by default); run it daily (cron, a scheduler)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from traces.services import purge


class Command(BaseCommand):
    help = "Delete the OTLP traces' per-minute figures older than the retention."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=None, help="Override the retention.")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"] or settings.DETECTIVE_TRACE_RETENTION_DAYS
        if days < 1:
            self.stderr.write("--days must be 1 or more.")
            raise SystemExit(2)
        routes, errors = purge(timezone.now() - timedelta(days=days))
        self.stdout.write(
            f"Deleted {routes:,} route minutes and {errors:,} error minutes older than {days} days."
        )
