"""`python -m detective_client`: what a CI job runs, with Python and httpx alone.

    DETECTIVE_URL=https://detective.example.com DETECTIVE_TOKEN=... \\
      python -m detective_client ingest 1.4.0 --service shop --git-range v1.3.0..v1.4.0 \\
        --junit reports/ --metrics-file metrics.txt
    python -m detective_client verdict 1.4.0 --service shop --wait 600 --fail-on high \\
        --markdown verdict.md

`ingest` reads everything first (the git range, every JUnit file, the metrics file) and sends
nothing when one of them is wrong; then it creates or updates the release and sends each part.
It exits 0 when all was accepted, 1 with the reason otherwise. `verdict` exits as
`verdict.exit_code` says (0 below the bar, 1 at or above, 2 waits for a person, 3 no verdict).
The token comes from the environment only, never the command line (process lists and job
logs show command lines).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import httpx

from detective_client import verdict as verdicts
from detective_client.api import ApiError, ClientError, DetectiveApi
from detective_client.git import GitError, read_range, resolve, split_range
from detective_client.records import CommitRecord

MAX_FILE_BYTES = 200 * 1024 * 1024


@dataclass(frozen=True)
class Sources:
    """What one `ingest` sends, read and checked before anything is sent."""

    release: dict[str, Any]
    commits: list[CommitRecord]
    junit: list[tuple[str, bytes]]
    metrics: bytes | None


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


def collect(args: argparse.Namespace, environment: dict[str, str]) -> Sources:
    release: dict[str, Any] = {"service": args.service, "version": args.version}
    if args.environment:
        release["environment"] = args.environment
    commits: list[CommitRecord] = []
    if args.git_range:
        repo = Path(args.git_repo)
        commits = read_range(repo, args.git_range)
        start, end = split_range(args.git_range)
        release["git"] = {"from_ref": start, "to_ref": end, "head_sha": resolve(repo, end)}
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
    return Sources(release, commits, junit_files(args.junit or []), metrics)


def ingest(
    args: argparse.Namespace, api: DetectiveApi, environment: dict[str, str], out: TextIO
) -> int:
    sources = collect(args, environment)
    service, version = args.service, args.version
    answer = api.put_release(sources.release)
    done = "created" if isinstance(answer, dict) and answer.get("created") else "updated"
    where = f" ({answer['url']})" if isinstance(answer, dict) and answer.get("url") else ""
    print(f"release {service} {version}: {done}{where}", file=out)
    if sources.commits:
        api.send_commits(service, version, sources.commits)
        print(f"commits: {len(sources.commits)} sent ({args.git_range})", file=out)
    for name, xml in sources.junit:
        api.send_junit(service, version, name, xml)
        print(f"JUnit: {name} sent ({len(xml):,} bytes)", file=out)
    if sources.metrics is not None:
        api.send_metrics(service, version, Path(args.metrics_file).name, sources.metrics)
        print(f"metrics: {args.metrics_file} sent", file=out)
    if args.assess:
        run = api.assess(service, version)
        where = f": {run['url']}" if isinstance(run, dict) and run.get("url") else ""
        print(f"assessment queued{where}", file=out)
    return 0


def wait_for_verdict(
    api: DetectiveApi,
    service: str,
    version: str,
    wait_s: float,
    interval_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The verdict, asked again every `interval_s` while it is pending, for up to `wait_s`."""
    deadline = clock() + wait_s
    while True:
        answer = api.verdict(service, version)
        remaining = deadline - clock()
        if answer.get("state") not in verdicts.PENDING_STATES or remaining <= 0:
            return answer
        sleep(min(interval_s, remaining))


def verdict(args: argparse.Namespace, api: DetectiveApi, out: TextIO, err: TextIO) -> int:
    try:
        answer = wait_for_verdict(api, args.service, args.version, args.wait, args.interval)
    except ApiError as error:
        if error.status == 404:
            print(f"no verdict: {error.reason}", file=err)
            return verdicts.NO_VERDICT
        raise
    code = verdicts.exit_code(answer, args.fail_on)
    if args.json:
        print(json.dumps(answer, indent=2, ensure_ascii=False), file=out)
    else:
        print(verdicts.one_line(answer, args.service, args.fail_on), file=out)
    if args.markdown == "-":
        print(verdicts.markdown(answer, args.service, args.fail_on), file=out)
    elif args.markdown:
        Path(args.markdown).write_text(
            verdicts.markdown(answer, args.service, args.fail_on), encoding="utf-8"
        )
    if code == verdicts.NO_VERDICT and answer.get("state") in verdicts.PENDING_STATES:
        print(f"no verdict: still {answer.get('state')} after {args.wait:g} s", file=err)
    return code


def parser(environment: dict[str, str]) -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m detective_client",
        description="Send a release's sources to Detective and read its verdict back.",
    )
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
        sub.add_argument("--timeout", type=float, default=30.0, help="seconds per request")

    send = commands.add_parser("ingest", help="create or update a release and send its sources")
    common(send)
    send.add_argument("--environment", help="where it is deployed, e.g. production")
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

    ask = commands.add_parser("verdict", help="the release's verdict, as an exit code")
    common(ask)
    ask.add_argument("--wait", type=float, default=0.0, help="seconds to wait for a verdict")
    ask.add_argument("--interval", type=float, default=5.0, help="seconds between asks")
    ask.add_argument("--fail-on", choices=["high", "medium"], default="high")
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
    token = environment.get("DETECTIVE_TOKEN", "")
    failure = 1 if args.command == "ingest" else verdicts.NO_VERDICT
    try:
        with DetectiveApi(args.url, token, timeout=args.timeout, transport=transport) as api:
            if args.command == "ingest":
                return ingest(args, api, environment, err)
            return verdict(args, api, out, err)
    except (ClientError, GitError) as error:
        print(f"detective: {error}", file=err)
        return failure
