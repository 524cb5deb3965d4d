"""`manage.py bench`: the benchmark suite (see bench/suite.py and docs/developing/benchmarks.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console

from bench import suite
from bench.harness import markdown_table, render


class Command(BaseCommand):
    help = (
        "Run the benchmarks (agent overhead, context management, live latency, throughput, "
        "pages, memory), print the figures and optionally write them as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--quick",
            action="store_true",
            help="Smaller sizes and fewer rounds (under a minute); never fails on a figure.",
        )
        parser.add_argument("--json", type=Path, metavar="PATH", help="Write the results here.")
        parser.add_argument(
            "--markdown", type=Path, metavar="PATH", help="Write the table as Markdown here."
        )
        parser.add_argument(
            "--only",
            metavar="NAME,...",
            help=f"Run only these benchmarks ({', '.join(suite.BENCHMARKS)}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            names = suite.select(options["only"])
        except ValueError as error:
            raise CommandError(str(error)) from None
        console = Console(file=self.stdout, width=160, soft_wrap=True)
        command = " ".join(["uv run manage.py bench", *sys.argv[2:]])
        report = suite.run(names, quick=options["quick"], command=command, console=console)
        render(report, console)
        if options["json"]:
            report.write_json(options["json"])
            console.print(f"figures written to {options['json']}")
        if options["markdown"]:
            options["markdown"].write_text(markdown_table(report.results) + "\n")
            console.print(f"table written to {options['markdown']}")
        crashed = suite.crashed(report)
        if crashed:
            # A figure that misses its target is a finding, not an error; a benchmark that
            # could not run at all is.
            raise CommandError(f"benchmark(s) failed to run: {', '.join(crashed)}")
