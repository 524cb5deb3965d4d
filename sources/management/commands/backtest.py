"""`manage.py backtest --service S --git-repo PATH`: what the policy in force would have said of
each release of a service's past, from its tags (`sources/backtest.py` says how, and why in a
rolled-back transaction)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from releases.management.usage import USAGE, UsageCommand
from releases.models import Service
from sources import services
from sources.backtest import (
    ORDERS,
    Backtest,
    BacktestError,
    ReleaseRow,
    markdown,
    release_tags,
    replay,
)

# A release's sentences in the printed table: the rest is in --json and --markdown.
SHOWN_CHARS = 160


def writable(path: Path, option: str) -> None:
    """The file's folder is made when missing (as `verdict --markdown` does); a usage error
    saying why when it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CommandError(
            f"Cannot write {option} {path}: {error.strerror or error}", returncode=USAGE
        ) from None
    if path.is_dir():
        raise CommandError(f"Cannot write {option} {path}: it is a folder", returncode=USAGE)


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError("at least 1")
    return number


class Command(UsageCommand):
    help = (
        "Replay a service's releases from its git tags and show what the policy would say. "
        "Exits 0 when done, 1 when the replay failed (the message says why), 64 on a usage "
        "error (an unknown option or service, a file that cannot be written)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--service", required=True, help="The service whose policy it is.")
        parser.add_argument("--git-repo", type=Path, required=True, help="A local checkout.")
        parser.add_argument("--tags", default="*", help="A glob on tag names, e.g. 'v*'.")
        parser.add_argument("--last", type=_positive, help="Only the last N releases.")
        parser.add_argument(
            "--order",
            choices=ORDERS,
            default="version",
            help="Tags in version order (default) or by date.",
        )
        parser.add_argument("--junit-dir", type=Path, help="JUnit XML per tag: <tag>.xml.")
        parser.add_argument("--metrics-dir", type=Path, help="Metrics per tag: <tag>.prom.")
        parser.add_argument("--json", type=Path, metavar="FILE", help="Write the result here.")
        parser.add_argument("--markdown", type=Path, metavar="FILE", help="The table as Markdown.")
        parser.add_argument(
            "--keep",
            action="store_true",
            help="Store the replayed releases in the service (default: nothing is stored).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.perf_counter()
        repo: Path = options["git_repo"]
        try:
            known = services.find_service(options["service"])
        except services.IngestError as error:
            raise CommandError(error.message, returncode=USAGE) from None
        if known is None:
            # A team may backtest a service before it sends Detective anything: said, not
            # refused (a misspelt name would otherwise pass unnoticed).
            others = ", ".join(Service.objects.order_by("slug").values_list("slug", flat=True))
            self.stderr.write(
                f"note: no service {options['service']!r} in Detective yet (it has: "
                f"{others or 'none'}); replayed under the policy in force."
            )
        # Refused before the replay, which can take minutes: what would fail only at its end.
        for name in ("json", "markdown"):
            if options[name]:
                writable(options[name], f"--{name}")
        try:
            tags = release_tags(repo, options["tags"], options["last"], order=options["order"])
            result = replay(
                options["service"],
                repo,
                tags,
                junit_dir=options["junit_dir"],
                metrics_dir=options["metrics_dir"],
                keep=options["keep"],
                progress=self._row,
            )
        except BacktestError as error:
            raise CommandError(f"backtest: {error}") from None
        result.seconds = time.perf_counter() - started
        self._totals(result)
        try:
            if options["json"]:
                options["json"].write_text(json.dumps(result.as_dict(), indent=2) + "\n")
            if options["markdown"]:
                options["markdown"].write_text(markdown(result))
        except OSError as error:
            raise CommandError(
                f"Cannot write: {error.strerror or error}", returncode=USAGE
            ) from None

    def _row(self, row: ReleaseRow) -> None:
        self.stdout.write(
            f"{row.from_tag}..{row.to_tag}  {row.commits:>4} commits  {row.severity.upper()}"
        )
        if row.policy_severity != row.severity:
            self.stdout.write(f"    ({row.policy_severity} with the missing sources counted)")
        for signal in row.raised:
            detail = signal.detail
            if len(detail) > SHOWN_CHARS:
                detail = detail[:SHOWN_CHARS].rsplit(" ", 1)[0] + " …"
            self.stdout.write(f"    {signal.level:<6} {signal.name}: {detail}")
        for note in row.notes:
            self.stdout.write(f"    note: {note}")

    def _totals(self, result: Backtest) -> None:
        counts = result.severities()
        self.stdout.write(
            f"\n{len(result.rows)} releases of {result.service} under policy version "
            f"{result.policy_version}: {counts['high']} high, {counts['medium']} medium, "
            f"{counts['low']} low ({result.seconds:.1f} s)"
        )
        if result.not_given:
            self.stdout.write(f"Not given, so not judged: {result.not_given_said()}.")
        fired = result.signals_fired()
        if fired:
            self.stdout.write(
                "Signals that raised a release: "
                + ", ".join(f"{name} {count}" for name, count in fired.items())
            )
