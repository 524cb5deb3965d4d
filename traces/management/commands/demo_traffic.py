"""`manage.py demo_traffic [--url URL] [--requests N]`: the demo shop's versions run and sent
requests, their spans exported to a running Detective (`traces.demo_traffic`)."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from traces.demo_traffic import DemoTrafficError, drive


class Command(BaseCommand):
    help = (
        "Run the demo shop's releases, send each a burst of requests and export their spans "
        "through the OpenTelemetry SDK's OTLP exporter to a running Detective."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--url",
            default=os.environ.get("DETECTIVE_API_URL") or "http://127.0.0.1:8000",
            help="The running site (default: DETECTIVE_API_URL, else http://127.0.0.1:8000).",
        )
        parser.add_argument(
            "--requests", type=int, default=60, help="Requests of each route, per version."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["requests"] <= 10_000:
            raise CommandError("--requests must be between 1 and 10000.")
        try:
            served = drive(options["url"], options["requests"], log=self.stdout.write)
        except DemoTrafficError as exc:
            raise CommandError(str(exc)) from None
        for run in served:
            self.stdout.write(
                f"{run.version}: {run.requests} requests, {run.errors} failed, "
                f"{run.spans} spans exported"
            )
        self.stdout.write(self.style.SUCCESS("Demo traffic sent."))
