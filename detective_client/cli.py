"""`python -m detective_client`: what a CI job runs, with Python and httpx alone.

    DETECTIVE_URL=https://detective.example.com DETECTIVE_TOKEN=... \\
      python -m detective_client ingest 1.4.0 --service shop --git-range v1.3.0..v1.4.0 \\
        --junit reports/ --metrics-file metrics.txt
    python -m detective_client verdict 1.4.0 --service shop --wait 600 --fail-on high \\
        --markdown verdict.md

`ingest` reads everything first (the git range, every JUnit file, the metrics file) and sends
nothing when one of them is wrong; then it creates or updates the release and sends each part.
It exits 0 when all was accepted, 1 with the reason otherwise. `verdict` exits as
`verdict.exit_code` says (0 below the bar, 1 at or above, 2 waits for a person, 3 no verdict)
and writes its Markdown and JSON whatever happened, the server away included, so a job's
summary always says why. A usage error exits 64 (EX_USAGE), never one of those four.
The token comes from the environment only, never the command line (process lists and job
logs show command lines).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn, TextIO

import httpx

from detective_client import __version__, summary
from detective_client import verdict as verdicts
from detective_client.api import ApiError, ClientError, DetectiveApi, Unreachable
from detective_client.git import GitError, read_range, resolve, split_range, tag_subject
from detective_client.head import read_head, with_hunks
from detective_client.hunks import read_hunks
from detective_client.records import CommitRecord, HeadRecord

MAX_FILE_BYTES = 200 * 1024 * 1024


@dataclass(frozen=True)
class Sources:
    """What one `ingest` sends, read and checked before anything is sent."""

    release: dict[str, Any]
    commits: list[CommitRecord]
    junit: list[tuple[str, bytes]]
    metrics: bytes | None
    # The head's facts for ranking a failure's suspects (`detective_client.head`); None
    # without a range, or when they could not be read (the commits still go).
    head: HeadRecord | None = None
    note: str | None = None


def pipeline_url(environment: dict[str, str]) -> str | None:
    """The CI run's page, from the variables GitHub Actions and GitLab CI set."""
    if environment.get("CI_PIPELINE_URL"):
        return environment["CI_PIPELINE_URL"]
    server, repo, run = (
        environment.get(name)
        for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    )
    if server and repo and run:
        return f"{server}/{repo}/actions/runs/{run}"
    return None


def _read(path: Path, what: str) -> bytes:
    if not path.is_file():
        raise ClientError(f"{what} {path} does not exist or is not a file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ClientError(f"{what} {path} is over {MAX_FILE_BYTES // 2**20} MiB")
    return path.read_bytes()


def junit_files(paths: Sequence[str]) -> list[tuple[str, bytes]]:
    """(name, content) of each file; a folder gives its *.xml files. Names must differ, since
    the server keys a report by its file name."""
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(path.rglob("*.xml"))
            if not found:
                raise ClientError(f"the folder {path} holds no .xml file")
            files += found
        else:
            files.append(path)
    read: list[tuple[str, bytes]] = []
    seen: dict[str, Path] = {}
    for path in files:
        name = path.name
        if name in seen:
            raise ClientError(f"two JUnit files are named {name}: {seen[name]} and {path}")
        seen[name] = path
        read.append((name, _read(path, "the JUnit file")))
    return read


TITLE_MAX = 200  # the server's column


def release_title(args: argparse.Namespace) -> str | None:
    """`--title`, else the first line of the annotated tag the range ends at."""
    if args.title is not None:
        title = " ".join(args.title.split())
        if len(title) > TITLE_MAX:
            raise ClientError(f"--title is {len(title)} characters, over {TITLE_MAX}")
        return title or None
    if not args.git_range:
        return None
    subject = tag_subject(Path(args.git_repo), split_range(args.git_range)[1])
    return subject[:TITLE_MAX] if subject else None


def collect(args: argparse.Namespace, environment: dict[str, str]) -> Sources:
    release: dict[str, Any] = {"service": args.service, "version": args.version}
    if args.environment:
        release["environment"] = args.environment
    commits: list[CommitRecord] = []
    head: HeadRecord | None = None
    note: str | None = None
    if args.git_range:
        repo = Path(args.git_repo)
        commits = read_range(repo, args.git_range)
        start, end = split_range(args.git_range)
        release["git"] = {"from_ref": start, "to_ref": end, "head_sha": resolve(repo, end)}
        if commits:
            try:
                hunks = read_hunks(repo, args.git_range)
                commits, head = with_hunks(commits, hunks), read_head(repo, args.git_range, hunks)
            except GitError as error:
                # The changed lines only rank a failure's suspects: the release goes without.
                note = f"no changed lines sent (suspect commits not ranked): {error}"
    title = release_title(args)
    if title:
        release["title"] = title
    url = args.pipeline_url or pipeline_url(environment)
    if url:
        release["pipeline_url"] = url
    if args.deployed_at:
        try:
            deployed = datetime.fromisoformat(args.deployed_at)
        except ValueError:
            raise ClientError(
                f"--deployed-at {args.deployed_at!r} is not an ISO 8601 time"
            ) from None
        if deployed.tzinfo is None:
            raise ClientError(f"--deployed-at {args.deployed_at!r} needs a UTC offset (or Z)")
        release["deployed_at"] = deployed.isoformat()
    metrics = _read(Path(args.metrics_file), "the metrics file") if args.metrics_file else None
    return Sources(release, commits, junit_files(args.junit or []), metrics, head, note)


def _stored_part(part: dict[str, Any]) -> str:
    counts = {key: value for key, value in (part.get("counts") or {}).items() if key != "note"}
    shown = ", ".join(f"{value} {key.replace('_', ' ')}" for key, value in counts.items())
    new = "new" if part.get("created") else "already stored"
    return f"{part.get('kind')} {part.get('name')}: {new}" + (f" ({shown})" if shown else "")


def ingest(
    args: argparse.Namespace, api: DetectiveApi, environment: dict[str, str], out: TextIO
) -> int:
    """One request: the server stores the release and every source whole, or nothing of it
    (a refused file leaves no release or commits behind); the output says which."""
    sources = collect(args, environment)
    service, version = args.service, args.version
    metrics = (
        (Path(args.metrics_file).name, sources.metrics) if sources.metrics is not None else None
    )
    if sources.note:
        print(f"note: {sources.note}", file=out)
    try:
        answer = api.send_bundle(
            sources.release, sources.commits, sources.junit, metrics, head=sources.head
        )
    except ApiError as error:
        print(f"stored nothing of {service} {version}: {error}", file=out)
        return 1
    done = "created" if answer.get("created") else "updated"
    where = f" ({answer['url']})" if answer.get("url") else ""
    print(f"stored whole: release {service} {version} {done}{where}", file=out)
    for part in answer.get("parts") or []:
        print(f"  {_stored_part(part)}", file=out)
        # The server says how it read a metrics window when it is not the usual way (no deploy
        # time, no baseline): shown, since the figures are then not judged against a baseline.
        note = (part.get("counts") or {}).get("note")
        if isinstance(note, str):
            print(f"    note: {note}", file=out)
    if args.assess:
        run = api.assess(service, version)
        if isinstance(run, dict) and run.get("kept"):
            # The data has not changed since the standing verdict: the server keeps it, a
            # person's decision included, rather than sending the release back to review.
            print(f"assessment not repeated: {run.get('message', 'the verdict stands')}", file=out)
        else:
            where = f": {run['url']}" if isinstance(run, dict) and run.get("url") else ""
            print(f"assessment queued{where}", file=out)
    return 0


OUTAGE_PAUSE_FIRST_S, OUTAGE_PAUSE_CAP_S = 1.0, 15.0


def _passing(error: ClientError) -> bool:
    """An outage a wait rides out: no answer at all, or a 5xx (a restart, a proxy's 502)."""
    return isinstance(error, Unreachable) or (isinstance(error, ApiError) and error.status >= 500)


def through_outages(
    ask: Callable[[], dict[str, Any]],
    deadline: float,
    err: TextIO | None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """`ask()`, asked again after an outage with a back-off (1 s, doubling up to 15 s) until
    the wait's own deadline, with one line per outage: a web server restarted under `up` costs
    a waiting job a pause, not its verdict. A 4xx, or an outage that outlasts the deadline,
    is raised as before."""
    pause = OUTAGE_PAUSE_FIRST_S
    down_since: float | None = None
    while True:
        try:
            answer = ask()
        except ClientError as error:
            remaining = deadline - clock()
            if not _passing(error) or remaining <= 0:
                raise
            if down_since is None:
                down_since = clock()
                if err is not None:
                    print(
                        f"Detective did not answer ({error}); asking again until the wait ends",
                        file=err,
                    )
            sleep(min(pause, remaining))
            pause = min(pause * 2, OUTAGE_PAUSE_CAP_S)
            continue
        return answer


def wait_for_verdict(
    api: DetectiveApi,
    service: str,
    version: str,
    wait_s: float,
    interval_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    err: TextIO | None = None,
) -> dict[str, Any]:
    """The verdict, asked again every `interval_s` while it is pending, for up to `wait_s`
    (through outages: `through_outages`)."""
    deadline = clock() + wait_s
    while True:
        answer = through_outages(
            lambda: api.verdict(service, version), deadline, err, clock=clock, sleep=sleep
        )
        remaining = deadline - clock()
        if answer.get("state") not in verdicts.PENDING_STATES or remaining <= 0:
            return answer
        sleep(min(interval_s, remaining))


def failure_verdict(args: argparse.Namespace, error: ClientError) -> dict[str, Any]:
    """The verdict-shaped answer written when the server gave none, with what to do."""
    url = args.url or "$DETECTIVE_URL"
    if isinstance(error, Unreachable):
        step = (
            f"Detective did not answer at {url}: check that it runs and that DETECTIVE_URL "
            "is right, then re-run this job."
        )
    elif isinstance(error, ApiError) and error.status in (401, 403):
        step = (
            f"Detective refused the token: set DETECTIVE_TOKEN to an ingestion token of "
            f"{args.service} (the admin's Ingestion tokens), then re-run this job."
        )
    elif isinstance(error, ApiError) and error.status == 404:
        step = "No such release: send it first with `detective ingest VERSION --assess`."
    elif isinstance(error, ApiError):
        step = "Detective failed to answer: re-run this job; if it fails again, see its log."
    else:
        step = "Fix the job's settings named above, then re-run it."
    problem = error.reason if isinstance(error, ApiError) else str(error)
    return verdicts.unavailable(args.version, problem, step)


def markdown_ready(target: str | None) -> str | None:
    """Before anything is asked: a file's missing folders are made (a job's `reports/` may
    not exist yet); the reason, in one line, when it cannot be written there."""
    if not target or target == "-":
        return None
    path = Path(target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot write --markdown {target}: {error.strerror or error}"
    if path.is_dir():
        return f"cannot write --markdown {target}: it is a folder"
    return None


def write_markdown(target: str, text: str, out: TextIO) -> None:
    if target == "-":
        print(text, file=out)
        return
    try:
        Path(target).write_text(text, encoding="utf-8")
    except OSError as error:
        raise ClientError(f"cannot write --markdown {target}: {error.strerror or error}") from None


def report(args: argparse.Namespace, answer: dict[str, Any], out: TextIO, err: TextIO) -> int:
    """Print and write the verdict as asked; the exit code it calls for."""
    code = verdicts.exit_code(answer, args.fail_on)
    if args.json:
        print(json.dumps({**answer, "exit_code": code}, indent=2, ensure_ascii=False), file=out)
    else:
        print(verdicts.one_line(answer, args.service, args.fail_on), file=out)
    if args.markdown:
        text = summary.markdown(answer, args.service, code, args.fail_on)
        write_markdown(args.markdown, text, out)
    if answer.get("problem"):
        print(f"no verdict: {answer['problem']}", file=err)
    if answer.get("next_step"):
        print(answer["next_step"], file=err)
    return code


DECISION_POLL_FIRST_S, DECISION_POLL_CAP_S = 0.25, 2.0


def wait_for_decision(
    api: DetectiveApi,
    args: argparse.Namespace,
    err: TextIO,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Until a person has decided the report that waits for one, or `--wait-for-decision`
    seconds. Detective is told a pipeline waits (the review page shows it) and the review
    page's address is printed once; then the verdict is asked again, every 0.25 s at first,
    doubling up to 2 s, so a decision reaches the job within about 2 s. A reassessment that
    starts meanwhile (new data) is waited for within the same time, and a new report that
    needs a person is announced as the first was."""
    deadline = clock() + args.wait_for_decision

    def ask(call: Callable[[str, str], dict[str, Any]]) -> dict[str, Any]:
        return through_outages(
            lambda: call(args.service, args.version), deadline, err, clock=clock, sleep=sleep
        )

    answer = ask(api.waiting)
    announced = answer.get("report_id")
    if answer.get("state") == "needs_person":
        print(f"waiting for a person's decision: {answer.get('review_url')}", file=err)
    pause = DECISION_POLL_FIRST_S
    # A reassessment under way (new data came in) is waited for too: the waiting job gets
    # its verdict, or waits again if its report needs a person as well.
    while answer.get("state") == "needs_person" or answer.get("state") in verdicts.PENDING_STATES:
        remaining = deadline - clock()
        if remaining <= 0:
            break
        sleep(min(pause, remaining))
        pause = min(pause * 2, DECISION_POLL_CAP_S)
        answer = ask(api.verdict)
        if answer.get("state") == "needs_person" and answer.get("report_id") != announced:
            # Another report waits now: the review page is told a pipeline waits for it.
            answer = ask(api.waiting)
            announced = answer.get("report_id")
            print(f"waiting for a person's decision: {answer.get('review_url')}", file=err)
    return answer


def verdict(args: argparse.Namespace, api: DetectiveApi, out: TextIO, err: TextIO) -> int:
    answer = wait_for_verdict(api, args.service, args.version, args.wait, args.interval, err=err)
    if args.wait_for_decision and answer.get("state") == "needs_person":
        answer = wait_for_decision(api, args, err)
    if answer.get("state") in verdicts.PENDING_STATES and verdicts.by_policy(answer):
        print(
            f"no model assessment ({answer.get('state')} after {args.wait:g} s): "
            f"{verdicts.POLICY_LABEL} counts",
            file=err,
        )
    elif answer.get("state") in verdicts.PENDING_STATES:
        answer = {**answer, "next_step": verdicts.next_step(answer, args.wait)}
        print(f"no verdict: still {answer.get('state')} after {args.wait:g} s", file=err)
    elif answer.get("state") in ("failed", "needs_person"):
        answer = {**answer, "next_step": verdicts.next_step(answer, args.wait)}
    return report(args, answer, out, err)


EXIT_CODES = """exit codes:
  0   the severity that counts is below the bar (--fail-on)
  1   it is at or above the bar (medium-known: a medium on missing data alone is below)
  2   the report waits for a person's decision
  3   no verdict: the wait ran out, no such release, Detective unreachable or the token
      refused (without a model assessment the policy's verdict decides 0 or 1)
  64  a usage error (an unknown option, --wait nan, a --markdown path that cannot be made)"""


class UsageParser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error, the code that means "waits for a person": here a
    usage error has its own, 64 (EX_USAGE). Subparsers are made of the same class."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(verdicts.USAGE, f"{self.prog}: error: {message}\n")


def seconds(text: str) -> float:
    """A duration: a finite number, zero or more (`nan` would never end a wait)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds ≥ 0")
    return value


def positive_seconds(text: str) -> float:
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0 seconds")
    return value


def parser(environment: dict[str, str]) -> argparse.ArgumentParser:
    top = UsageParser(
        prog="detective",
        description="Send a release's sources to Detective and read its verdict back.",
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = top.add_subparsers(dest="command", required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("version", help="the release's version, e.g. 1.4.0")
        service = environment.get("DETECTIVE_SERVICE")
        sub.add_argument(
            "--service",
            default=service,
            required=not service,
            help="the service the release belongs to (default: $DETECTIVE_SERVICE)",
        )
        sub.add_argument(
            "--url",
            default=environment.get("DETECTIVE_URL", ""),
            help="Detective's address (default: $DETECTIVE_URL); the token is $DETECTIVE_TOKEN",
        )
        sub.add_argument(
            "--timeout", type=positive_seconds, default=30.0, help="seconds per request"
        )

    send = commands.add_parser("ingest", help="create or update a release and send its sources")
    common(send)
    send.add_argument("--environment", help="where it is deployed, e.g. production")
    send.add_argument(
        "--title",
        help="the release's title (default: the first line of the annotated tag TO of --git-range)",
    )
    send.add_argument("--git-range", help="FROM..TO of the checkout, e.g. v1.3.0..v1.4.0")
    send.add_argument("--git-repo", default=".", help="the checkout (default: .)")
    send.add_argument(
        "--junit",
        nargs="+",
        action="extend",  # `--junit a.xml --junit b.xml` keeps both, not the last
        metavar="FILE",
        help="JUnit XML files, or folders of them (the flag may be repeated)",
    )
    send.add_argument("--metrics-file", help="an OpenMetrics / Prometheus text file")
    send.add_argument("--pipeline-url", help="this run's page (default: from the CI's variables)")
    send.add_argument("--deployed-at", help="ISO 8601 time of the deploy, with its offset")
    send.add_argument(
        "--assess", action="store_true", help="then start its assessment (ask `verdict --wait`)"
    )

    ask = commands.add_parser(
        "verdict",
        help="the release's verdict, as an exit code",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXIT_CODES,
    )
    common(ask)
    ask.add_argument("--wait", type=seconds, default=0.0, help="seconds to wait for a verdict")
    ask.add_argument("--interval", type=positive_seconds, default=5.0, help="seconds between asks")
    ask.add_argument(
        "--wait-for-decision",
        type=seconds,
        default=0.0,
        metavar="SECONDS",
        help="when the report waits for a person, wait up to this long for their decision",
    )
    ask.add_argument(
        "--fail-on",
        choices=verdicts.FAIL_ON,
        default="high",
        help=(
            "the severity at which the exit code is 1 (default: high); medium-known: high, or "
            "a medium the release's data shows (a new failure, a worse error rate), not a "
            "medium on missing data alone (no metrics sent)"
        ),
    )
    ask.add_argument("--json", action="store_true", help="print the verdict's JSON")
    ask.add_argument(
        "--markdown",
        metavar="FILE",
        help="write a Markdown summary to FILE (- for standard output)",
    )
    return top


def main(
    argv: Sequence[str] | None = None,
    *,
    environment: dict[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    environment = dict(os.environ) if environment is None else environment
    out, err = out or sys.stdout, err or sys.stderr
    args = parser(environment).parse_args(argv)
    if args.command == "verdict" and (problem := markdown_ready(args.markdown)):
        print(f"detective: {problem}", file=err)
        return verdicts.USAGE
    token = environment.get("DETECTIVE_TOKEN", "")
    try:
        with DetectiveApi(args.url, token, timeout=args.timeout, transport=transport) as api:
            if args.command == "ingest":
                return ingest(args, api, environment, err)
            return verdict(args, api, out, err)
    except (ClientError, GitError) as error:
        print(f"detective: {error}", file=err)
        if args.command == "ingest":
            return 1
        return verdict_failure(args, error, out, err)


def verdict_failure(
    args: argparse.Namespace, error: ClientError | GitError, out: TextIO, err: TextIO
) -> int:
    """No verdict to read: the summary and the JSON say why and what to do, exit 3."""
    client_error = error if isinstance(error, ClientError) else ClientError(str(error))
    try:
        report(args, failure_verdict(args, client_error), out, err)
    except ClientError as unwritable:
        print(f"detective: {unwritable}", file=err)
    return verdicts.NO_VERDICT


def run() -> None:
    """The `detective` console script."""
    sys.exit(main())
