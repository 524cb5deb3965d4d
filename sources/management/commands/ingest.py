"""`manage.py ingest VERSION`: a release's sources from this machine, through the same services
as the API. Everything given is ingested in one transaction: an error in any source (a ref that
does not exist, an empty range, a malformed report, a Prometheus that does not answer) stops the
command with the reason and stores nothing of this run."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from detective_client import git
from detective_client.head import read_head, with_hunks
from detective_client.hunks import read_hunks
from sources import services
from sources.models import MetricWindow
from sources.parsers import prometheus
from sources.parsers.openmetrics import MetricsFormatError, parse_metrics_file
from sources.services import IngestError, Origin, ReleaseFields
from sources.services.suspects import compute_suspects


def _moment(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError("give the offset, e.g. 2026-11-20T10:00:00+00:00")
    return moment


def _timeout(value: str) -> float:
    """Seconds to wait for Prometheus: a finite number above zero (nan, -1 or inf would make
    httpx wait forever or fail inside)."""
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{value} is not a number of seconds above 0")
    return seconds


_timeout.__name__ = "timeout"  # argparse names the type in its message


def junit_files(paths: list[Path]) -> list[Path]:
    """The reports given: files as given, a folder's *.xml files (its subfolders' too, as the
    client reads one) in path order; each once."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.xml") if p.is_file())
            if not found:
                raise CommandError(f"{path}: a folder with no *.xml file.")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise CommandError(f"{path}: no such file.")
    return list(dict.fromkeys(files))


class Command(BaseCommand):
    help = "Ingest a release's git range, JUnit XML reports and metrics (and assess it)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("version", help="The release, e.g. v2.1.0 (created when new).")
        parser.add_argument("--service", help="Its service (default: the default service).")
        parser.add_argument("--environment", help="e.g. production.")
        parser.add_argument("--deployed-at", type=_moment, help="ISO 8601 with its offset.")
        parser.add_argument("--pipeline-url", help="The CI run that built it.")
        parser.add_argument("--git-repo", type=Path, help="A local checkout.")
        parser.add_argument("--git-range", help="FROM..TO, e.g. v2.0.0..v2.1.0.")
        parser.add_argument(
            "--junit",
            nargs="+",
            type=Path,
            action="extend",
            default=[],
            metavar="FILE",
            help="JUnit XML reports: several after one flag, the flag repeated, or a folder (its "
            "*.xml files, subfolders too). Every one is kept.",
        )
        parser.add_argument("--metrics-file", type=Path, help="OpenMetrics or Prometheus text.")
        parser.add_argument(
            "--window",
            choices=MetricWindow.values,
            help="Which window the whole metrics file measures (default: each sample counts in "
            "the window its timestamp lies in, from the deploy time).",
        )
        parser.add_argument("--prometheus", metavar="URL", help="Query this Prometheus.")
        parser.add_argument(
            "--prometheus-timeout",
            type=_timeout,
            default=prometheus.DEFAULT_TIMEOUT,
            metavar="SECONDS",
            help="How long to wait for Prometheus (seconds above 0).",
        )
        parser.add_argument("--assess", action="store_true", help="Assess it afterwards.")

    def handle(self, *args: Any, **options: Any) -> None:
        if bool(options["git_repo"]) != bool(options["git_range"]):
            raise CommandError("--git-repo and --git-range go together.")
        origin = Origin("command")
        try:
            with transaction.atomic():
                release = self._ingest(options, origin)
        except IngestError as exc:
            raise CommandError(exc.message) from None
        except git.GitError as exc:
            raise CommandError(f"git: {exc}") from None
        except MetricsFormatError as exc:
            raise CommandError(f"Refused: {exc}.") from None
        self.stdout.write(f"Summary of {release.service.slug} {release.version}:")
        for name, value in release.as_summary().items():
            self.stdout.write(f"  {name}: {value}")
        if options["assess"]:
            call_command(
                "assess", release.version, service=release.service.slug, stdout=self.stdout
            )

    def _ingest(self, options: dict[str, Any], origin: Origin) -> Any:
        from_ref = to_ref = head = None
        commits = None
        facts = None
        hunks = None
        if options["git_repo"]:
            commits = git.read_range(options["git_repo"], options["git_range"])
            start, end = git.split_range(options["git_range"])
            from_ref, to_ref = start or "", end
            head = git.resolve(options["git_repo"], end)
            if commits:
                # Kept as the CI client sends them, so a report sent later through the API
                # is ranked from the stored rows (sources/services/suspects.rank_stored).
                hunks = read_hunks(options["git_repo"], options["git_range"])
                commits = with_hunks(commits, hunks)
                facts = read_head(options["git_repo"], options["git_range"], hunks)
        fields = ReleaseFields(
            version=options["version"],
            service=options["service"],
            environment=options["environment"],
            git_from_ref=from_ref,
            git_to_ref=to_ref,
            head_sha=head,
            pipeline_url=options["pipeline_url"],
            deployed_at=options["deployed_at"],
        )
        release, created = services.upsert_release(fields, origin)
        self._say(f"release {release.service.slug} {release.version}", created, "")
        if commits is not None:
            # Ranked once below, from the checkout itself (compute_suspects).
            result = services.ingest_commits(
                release, commits, origin, file_names=[options["git_range"]], head=facts, rank=False
            )
            self._say(f"git {options['git_range']}", result.created, result.counts)
        for path in junit_files(options["junit"]):
            with path.open("rb") as stream:
                result = services.ingest_junit(
                    release, stream, path.name, origin, rank=not options["git_repo"]
                )
            self._say(f"junit {path.name}", result.created, result.counts)
            if result.counts.get("not_in_test_cases"):
                self.stdout.write(
                    f"  {path.name}: its header counts {result.counts['header_tests']:,} tests, "
                    f"{result.counts['not_in_test_cases']:,} more than its test cases (pytest's "
                    "subtests are counted so): kept as not_in_test_cases"
                )
        if options["git_repo"]:
            # The checkout is at hand only here: the failures' suspects are ranked now.
            found = compute_suspects(release, options["git_repo"], options["git_range"], hunks)
            self._say("suspects", True, {"failures with suspects": found})
        if options["metrics_file"]:
            path = options["metrics_file"]
            if not path.is_file():
                raise CommandError(f"{path}: no such file.")
            samples = parse_metrics_file(path)
            for result in services.ingest_metrics_file(
                release, samples, origin, window=options["window"], file_names=[path.name]
            ):
                window = result.counts.get("window", "")
                self._say(f"metrics {path.name} ({window})", result.created, result.counts)
        if options["prometheus"]:
            with prometheus.PrometheusClient(
                options["prometheus"], timeout=options["prometheus_timeout"]
            ) as client:
                results = services.ingest_prometheus(release, client, origin)
            for result in results:
                window = result.counts.get("window", "")
                self._say(f"prometheus {client.where} ({window})", result.created, result.counts)
        release.refresh_from_db()
        return release

    def _say(self, what: str, created: bool, counts: Any) -> None:
        state = "stored" if created else "already ingested, counted once"
        counts = dict(counts) if counts else {}
        # How a metrics window was read when it is not the usual way: said on a line of its own.
        note = counts.pop("note", "")
        detail = f" {counts}" if counts else ""
        self.stdout.write(f"{what}: {state}{detail}")
        if note:
            self.stdout.write(self.style.WARNING(f"  note: {note}"))
