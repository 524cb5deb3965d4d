"""`manage.py verdict VERSION`: a release's verdict for a pipeline, as an exit status.

    0  the severity that counts is below the bar (`--fail-on`, high by default)
    1  it is at or above the bar (`--fail-on medium-known`: high, or a medium that does not rest
       on missing data alone)
    2  the report waits for a person's decision
    3  there is no verdict: no such release, or an assessment still runs after a report on
       the data the release has now (or the `--wait` ran out)

When no model has filed on the data the release has now (none configured, the run failed or
has not run yet), the policy's verdict is the gate's: "the policy's verdict (no model
assessment)", with its severity and evidence, and the exit status follows it.

    64 a usage error (EX_USAGE: an unknown option, `--wait nan`), apart from the four above

`--json` prints the verdict as the API gives it; `--markdown FILE` writes a summary a CI job or
a pull-request comment shows as it is ("-" for standard output), in every case: no such
release included, with what to do. Its folder is made when missing.
"""

from __future__ import annotations

import json
import math
import sys
import time
from argparse import ArgumentTypeError
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from django.urls import reverse

from detective_client import summary
from detective_client import verdict as client_verdict
from releases import selectors, services
from releases.management.usage import USAGE, UsageCommand
from releases.models import Release
from releases.release_verdict import POLICY_SOURCE_LABEL, ReleaseVerdict, VerdictState
from releases.severity import SEVERITY_RANK

BELOW, AT_OR_ABOVE, NEEDS_PERSON, NO_VERDICT = 0, 1, 2, 3
POLL_SECONDS = 1.0


def seconds(text: str) -> float:
    """A finite number of seconds, zero or more (`nan` would never end a wait)."""
    try:
        value = float(text)
    except ValueError:
        raise ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise ArgumentTypeError(f"{text!r} is not a finite number of seconds >= 0")
    return value


def write_markdown(target: str, text: str, stdout: Any) -> None:
    if target == "-":
        stdout.write(text)
        return
    path = Path(target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise CommandError(
            f"Cannot write --markdown {target}: {error.strerror or error}", returncode=USAGE
        ) from None


def missing_markdown(version: str, service: str | None, fail_on: str) -> str:
    where = f" of service {service}" if service else ""
    answer = client_verdict.unavailable(
        version,
        f"no release {version}{where} in Detective.",
        "send it first (`detective ingest VERSION --assess`), then ask again.",
    )
    return summary.markdown(answer, service or "", NO_VERDICT, fail_on)


# `medium-known` is the bar between: a medium the release's data shows fails, a medium that
# rests on missing fields alone (no metrics sent) passes (`releases/missing_data.py`).
FAIL_ON = ("high", "medium-known", "medium")


def at_or_above(verdict: ReleaseVerdict, severity: str, fail_on: str) -> bool:
    if fail_on == "medium-known":
        if severity == "medium" and verdict.missing_data_only:
            return False
        fail_on = "medium"
    return SEVERITY_RANK[severity] >= SEVERITY_RANK[fail_on]


def exit_code(verdict: ReleaseVerdict | None, fail_on: str) -> int:
    if verdict is None or verdict.severity is None:
        return NO_VERDICT
    if verdict.by_policy:
        return AT_OR_ABOVE if at_or_above(verdict, verdict.severity, fail_on) else BELOW
    if verdict.state in (VerdictState.RUNNING, VerdictState.FAILED, VerdictState.NOT_ASSESSED):
        return NO_VERDICT
    if verdict.state == VerdictState.NEEDS_PERSON:
        return NEEDS_PERSON
    return AT_OR_ABOVE if at_or_above(verdict, verdict.severity, fail_on) else BELOW


def page_url(release: Release) -> str:
    return page_url_of(release.get_absolute_url())


def page_url_of(path: str) -> str:
    base = (settings.DETECTIVE_API_URL or "").rstrip("/")
    return f"{base}{path}" if base else path


def _word(severity: str | None) -> str:
    return severity.capitalize() if severity else "none"


def markdown(release: Release, verdict: ReleaseVerdict, code: int, fail_on: str) -> str:
    """The CI client's summary (detective_client/summary.py), so that a job reads the same
    whichever of the two wrote it."""
    answer = {**verdict.as_json(), "url": page_url(release)}
    if verdict.report_id is not None:
        answer["review_url"] = review_url(verdict.report_id)
    return summary.markdown(answer, release.service.name, code, fail_on)


def review_url(report_id: int) -> str:
    return f"{page_url_of(reverse('releases:review'))}#queue-item-{report_id}"


class Command(UsageCommand):
    help = (
        "Print a release's verdict and exit 0 (below the bar), 1 (at or above it), 2 (waits "
        "for a person), 3 (no verdict) or 64 (a usage error)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("version", help="The release, e.g. v2.1.0.")
        parser.add_argument(
            "--service", help="The release's service, by slug or name (default: the default one)."
        )
        parser.add_argument(
            "--wait",
            type=seconds,
            default=0.0,
            metavar="SECONDS",
            help="Wait up to this long for an assessment under way to end.",
        )
        parser.add_argument(
            "--wait-for-decision",
            type=seconds,
            default=0.0,
            metavar="SECONDS",
            help="When the report waits for a person, wait up to this long for their decision.",
        )
        parser.add_argument(
            "--fail-on",
            choices=FAIL_ON,
            default="high",
            help=(
                "The severity at which the exit status is 1 (default: high); medium-known: "
                "high, or a medium the release's data shows (not one on missing data alone)."
            ),
        )
        parser.add_argument("--json", action="store_true", help="Print the verdict as JSON.")
        parser.add_argument(
            "--markdown", metavar="FILE", help="Write a Markdown summary there (- for stdout)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        version: str = options["version"]
        fail_on: str = options["fail_on"]
        release = selectors.find_release(version, options["service"])
        if release is None:
            where = f" of service {options['service']!r}" if options["service"] else ""
            self.stderr.write(f"No release {version!r}{where}.")
            if options["json"]:
                missing = {
                    "version": version,
                    "state": "unavailable",
                    "problem": f"no release {version!r}{where}",
                    "next_step": "send it first (detective ingest VERSION --assess)",
                    "exit_code": NO_VERDICT,
                }
                self.stdout.write(json.dumps(missing))
            if options["markdown"]:
                text = missing_markdown(version, options["service"], fail_on)
                write_markdown(options["markdown"], text, self.stdout)
            sys.exit(NO_VERDICT)
        verdict = selectors.release_verdict(release)
        deadline = time.monotonic() + options["wait"]
        while verdict.state == VerdictState.RUNNING and time.monotonic() < deadline:
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            verdict = selectors.release_verdict(release)
        if options["wait_for_decision"] and verdict.state == VerdictState.NEEDS_PERSON:
            verdict = self._wait_for_decision(release, verdict, options["wait_for_decision"])
        code = exit_code(verdict, fail_on)
        url = page_url(release)
        if options["json"]:
            self.stdout.write(json.dumps({**verdict.as_json(), "url": url, "exit_code": code}))
        else:
            self.stdout.write(self._line(verdict, code, fail_on))
        if options["markdown"]:
            text = markdown(release, verdict, code, fail_on)
            write_markdown(options["markdown"], text, self.stdout)
        sys.exit(code)

    def _wait_for_decision(
        self, release: Release, verdict: ReleaseVerdict, wait_s: float
    ) -> ReleaseVerdict:
        """Until a person decided (the review page shows that a pipeline waits), asking every
        0.25 s at first, doubling up to 2 s."""
        deadline = time.monotonic() + wait_s
        if verdict.report_id is not None:
            services.note_pipeline_waiting(verdict.report_id)
        review = review_url(verdict.report_id or 0)
        self.stderr.write(f"Waiting for a person's decision: {review}")
        pause = 0.25
        while verdict.state == VerdictState.NEEDS_PERSON and time.monotonic() < deadline:
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 2.0)
            verdict = selectors.release_verdict(release)
        return verdict

    def _line(self, verdict: ReleaseVerdict, code: int, fail_on: str) -> str:
        if code == NO_VERDICT:
            why = {
                VerdictState.RUNNING: "an assessment is still running",
                VerdictState.FAILED: f"the latest run failed: {verdict.run_error}".rstrip(": "),
                VerdictState.NOT_ASSESSED: "it was never assessed",
            }.get(verdict.state, "no report")
            return f"{verdict.version}: no verdict ({why})."
        if verdict.by_policy:
            bar = f"At or above {fail_on}" if code == AT_OR_ABOVE else f"Below {fail_on}"
            suspects = f" Suspects: {'; '.join(verdict.suspects)}." if verdict.suspects else ""
            return (
                f"{verdict.version}: {_word(verdict.severity)} risk, {POLICY_SOURCE_LABEL} "
                f"({verdict.state_label.lower()}). {bar}.{suspects}"
            )
        line = (
            f"{verdict.version}: {_word(verdict.severity)} risk ({verdict.state_label.lower()}; "
            f"the model {_word(verdict.model_severity).lower()}, the policy "
            f"{_word(verdict.policy_severity).lower()})."
        )
        if code == NEEDS_PERSON:
            return line + " Waits for a person's decision."
        return line + (f" At or above {fail_on}." if code == AT_OR_ABOVE else f" Below {fail_on}.")
