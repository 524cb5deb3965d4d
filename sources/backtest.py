"""A backtest: what the policy in force would have said of each release of a service's past.

Each pair of consecutive tags of a git checkout is a release (the older tag to the newer,
oldest first), ingested as `manage.py ingest` would ingest it (its commits, and its JUnit XML
and metrics files when given, named after the tag) through the same services, then judged by
the same function as every report (`sources.judging.judge_release`), history included: the
history of release N is releases 1 .. N-1 of the replay.

Where it is stored: in a transaction that is rolled back at the end (`replay(keep=False)`),
under a hidden service of its own (`backtest-<service>`), so nothing of it outlives the run and
the service's real releases are neither read nor touched. Why not an in-memory computation:
the policy reads a release's history from the detail tables (`sources.history`), and a second
reader of commits, tests and metrics made for the backtest could drift from the one the site
uses; replaying through the same code is what makes the table say what the gate would have
said. Why not a second database: Django's connections are set at start-up, and the services
write through the default one; a rolled-back transaction is a scratch database for everything
they do. On SQLite the replay holds the database's write lock while it runs (a minute for 100
tags), which a site on the same file waits for; `keep=True` stores the replay in the service
itself, one transaction per release.
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import re
import subprocess
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import transaction

from detective_client import git
from releases import stored_verdict
from releases.models import Release, Service
from risk.settings import LEVEL_RANK
from risk.signal import PolicyVerdict, severity_of
from sources import services
from sources.earlier_commits import EarlierCommits
from sources.judging import judge_release
from sources.parsers.openmetrics import MetricsFormatError, parse_metrics_file
from sources.services import IngestError, Origin, ReleaseFields

SCRATCH_PREFIX = "backtest-"
MISSING_TESTS, MISSING_METRICS = "missing_tests", "missing_deployment_metrics"
_VERSION_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")
METRICS_SUFFIXES = (".prom", ".txt", ".om", ".metrics", ".openmetrics")


class BacktestError(Exception):
    """The backtest cannot run: the message says why, for a command error."""


@dataclass(frozen=True, slots=True)
class Tag:
    name: str
    sha: str
    at: datetime


@dataclass(slots=True)
class SignalSaid:
    name: str
    level: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "level": self.level, "detail": self.detail}


@dataclass(slots=True)
class ReleaseRow:
    version: str
    from_tag: str
    to_tag: str
    commits: int = 0
    severity: str = ""
    # The policy's severity with every signal, those of sources not given included.
    policy_severity: str = ""
    raised: list[SignalSaid] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "from": self.from_tag,
            "to": self.to_tag,
            "commits": self.commits,
            "severity": self.severity,
            "policy_severity": self.policy_severity,
            "raised_by": [s.as_dict() for s in self.raised],
            "notes": self.notes,
        }


@dataclass(slots=True)
class Backtest:
    service: str
    repo: str
    policy_version: int | None = None
    rows: list[ReleaseRow] = field(default_factory=list)
    seconds: float = 0.0
    # Signal-name prefixes of sources the backtest was not given (left out of the severity).
    not_given: tuple[str, ...] = ()

    def not_given_said(self) -> str:
        what = {
            MISSING_TESTS: "test results (no --junit-dir)",
            MISSING_METRICS: "metrics (no --metrics-dir)",
        }
        return ", ".join(what[prefix] for prefix in self.not_given)

    def severities(self) -> dict[str, int]:
        counted = Counter(row.severity for row in self.rows if row.severity)
        return {level: counted.get(level, 0) for level in ("high", "medium", "low")}

    def signals_fired(self) -> dict[str, int]:
        """How many releases each signal raised above low, most often first."""
        counted = Counter(s.name for row in self.rows for s in row.raised)
        return dict(sorted(counted.items(), key=lambda item: (-item[1], item[0])))

    def as_dict(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "repo": self.repo,
            "policy_version": self.policy_version,
            "releases": [row.as_dict() for row in self.rows],
            "totals": {
                "releases": len(self.rows),
                "severity": self.severities(),
                "signals_raising": self.signals_fired(),
            },
            "not_given": self.not_given_said(),
            "seconds": round(self.seconds, 2),
        }


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        env={**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"},
        check=False,
    )
    if done.returncode != 0:
        raise BacktestError(f"git in {repo}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode("utf-8", errors="replace")


ORDERS = ("version", "date")
_PRE_RELEASE_SUFFIXES = ("-alpha", "-beta", "-rc", "-pre", ".dev", "a", "b", "rc")


def release_tags(
    repo: Path, pattern: str = "*", last: int | None = None, *, order: str = "version"
) -> list[Tag]:
    """The tags matching `pattern` (a glob on the tag's name) that name commits, oldest first.

    `order` "version" (the default): by git's version order (`v:refname`: 1.10 after 1.9,
    a tie by date). Measured on pallets/itsdangerous, dates first put the tag `1.0.x` (made
    after 2.1.1 on an old branch) between 2.1.1 and 1.1.x: two ranges of nothing. "date": by
    the tag's date (an annotated tag's own, else its commit's), for tags that are no version
    numbers. `last`: the last `last` releases, so `last + 1` tags."""
    if not Path(repo).is_dir():
        raise BacktestError(f"{repo} is not a folder")
    if order not in ORDERS:
        raise BacktestError(f"order {order!r}: choose from {', '.join(ORDERS)}")
    keys = ["creatordate", "v:refname"] if order == "version" else ["v:refname", "creatordate"]
    # Pre-releases before their release (2.0.0a1, 2.0.0rc1, v3.0.0-beta.1, then 2.0.0): git
    # sorts 2.0.0 first unless told these suffixes.
    suffixes = [f"versionsort.suffix={x}" for x in _PRE_RELEASE_SUFFIXES]
    out = _git(
        repo,
        *(arg for pair in (("-c", s) for s in suffixes) for arg in pair),
        "for-each-ref",
        *(f"--sort={key}" for key in keys),
        "--format=%(refname:strip=2)%00%(objecttype)%00%(objectname)%00%(*objecttype)"
        "%00%(*objectname)%00%(creatordate:iso-strict)",
        "refs/tags",
    )
    tags = []
    for line in out.splitlines():
        name, kind, sha, peeled_kind, peeled, when = line.split("\0")
        commit = sha if kind == "commit" else peeled if peeled_kind == "commit" else None
        if commit is None or not fnmatch.fnmatchcase(name, pattern):
            continue
        tags.append(Tag(name, commit, datetime.fromisoformat(when)))
    if last is not None:
        tags = tags[-(last + 1) :]
    return tags


def version_of(tag: str) -> str:
    """A tag as a release version (letters, digits, `.`, `-`, `_`, `+`; at most 64)."""
    return _VERSION_UNSAFE.sub("-", tag)[:64] or "tag"


def files_for(folder: Path | None, tag: str, suffixes: Sequence[str]) -> list[Path]:
    """A tag's files in `folder`: `<tag><suffix>`, or every such file in a folder `<tag>/`
    (a tag's `/` may be written `_` in a file name)."""
    if folder is None:
        return []
    found: list[Path] = []
    for name in dict.fromkeys((tag, tag.replace("/", "_"), version_of(tag))):
        found += [folder / f"{name}{suffix}" for suffix in suffixes]
        inner = folder / name
        if inner.is_dir():
            found += sorted(p for p in inner.iterdir() if p.suffix in suffixes)
    return [p for p in dict.fromkeys(found) if p.is_file()]


def replay(
    service: str,
    repo: Path,
    tags: Sequence[Tag],
    *,
    junit_dir: Path | None = None,
    metrics_dir: Path | None = None,
    keep: bool = False,
    progress: Callable[[ReleaseRow], None] | None = None,
) -> Backtest:
    """Each pair of consecutive `tags` ingested and judged, oldest first."""
    if len(tags) < 2:
        raise BacktestError(
            f"{len(tags)} tag{'s' if len(tags) != 1 else ''} matched: a release is two "
            "consecutive tags, so at least 2 are needed"
        )
    for folder in (junit_dir, metrics_dir):
        if folder is not None and not folder.is_dir():
            raise BacktestError(f"{folder} is not a folder")
    result = Backtest(
        service=service,
        repo=str(repo),
        not_given=tuple(
            prefix
            for prefix, folder in ((MISSING_TESTS, junit_dir), (MISSING_METRICS, metrics_dir))
            if folder is None
        ),
    )
    name = service if keep else f"{SCRATCH_PREFIX}{service}"
    # Kept, each release's stored verdict is written once at the end; rolled back, never.
    with transaction.atomic(), stored_verdict.once() if keep else stored_verdict.never_read():
        if not keep:
            scratch = services.service_for(name, Origin("command"), create=True)
            if Release.objects.filter(service=scratch).exists():
                raise BacktestError(f"the service {name!r} has releases: it is the backtest's")
            Service.objects.filter(pk=scratch.pk).update(hidden=True)
        at: datetime | None = None
        # The releases are judged oldest first: their commits are carried to the next ones'
        # history instead of read again for each (sources/earlier_commits.py).
        carried = EarlierCommits()
        for before, tag in itertools.pairwise(tags):
            # Deploy order is release order: tags of the same second keep theirs.
            at = tag.at if at is None or tag.at > at else at + timedelta(microseconds=1)
            row = _one(name, repo, before, tag, at, junit_dir, metrics_dir, result, carried)
            result.rows.append(row)
            if progress is not None:
                progress(row)
        if not keep:
            transaction.set_rollback(True)
    return result


def _one(
    service: str,
    repo: Path,
    before: Tag,
    tag: Tag,
    at: datetime,
    junit_dir: Path | None,
    metrics_dir: Path | None,
    result: Backtest,
    carried: EarlierCommits,
) -> ReleaseRow:
    origin = Origin("command")
    row = ReleaseRow(version=version_of(tag.name), from_tag=before.name, to_tag=tag.name)
    release, _ = services.upsert_release(
        ReleaseFields(
            version=row.version,
            service=service,
            git_from_ref=before.name,
            git_to_ref=tag.name,
            head_sha=tag.sha,
            deployed_at=at,
        ),
        origin,
    )
    commits: list[Any] = []
    if before.sha == tag.sha:
        row.notes.append(f"a rebuild: {tag.name} is the commit of {before.name}")
    else:
        try:
            commits = git.read_range(repo, f"{before.sha}..{tag.sha}")
        except git.EmptyRange:
            row.notes.append(f"no commits from {before.name} to {tag.name} (not its ancestor?)")
        except git.GitError as error:
            row.notes.append(f"git: {error}")
    row.commits = len(commits)
    if commits:
        _ingest(
            row,
            lambda: services.ingest_commits(
                release, commits, origin, file_names=[f"{before.name}..{tag.name}"]
            ),
        )
    for path in files_for(junit_dir, tag.name, (".xml",)):
        with path.open("rb") as stream:
            _ingest(row, lambda s=stream, p=path: services.ingest_junit(release, s, p.name, origin))
    for path in files_for(metrics_dir, tag.name, METRICS_SUFFIXES):
        try:
            samples = parse_metrics_file(path)
        except MetricsFormatError as error:
            row.notes.append(f"{path.name}: {error}")
            continue
        _ingest(
            row,
            lambda p=path, s=samples: services.ingest_metrics_file(
                release, s, origin, file_names=[p.name]
            ),
        )
    release.refresh_from_db()
    judged = judge_release(release, carried=carried)
    carried.add_release(release.pk)
    result.policy_version = judged.policy.version
    row.policy_severity = judged.verdict.severity
    # What the backtest was not given is not the release's fault: without --junit-dir every
    # release would be medium for "missing: the test results" (measured: 31 of 31 on
    # itsdangerous). Those signals are left out of the severity and said once in the totals.
    judged_on = [s for s in judged.verdict.signals if not s.name.startswith(result.not_given)]
    row.severity = severity_of(judged_on)
    row.raised = [
        SignalSaid(s.name, s.counts_as, s.detail)
        for s in PolicyVerdict(row.severity, tuple(judged_on)).raised()
        if LEVEL_RANK[s.counts_as] >= LEVEL_RANK["medium"]
    ]
    return row


def _ingest(row: ReleaseRow, call: Callable[[], Any]) -> None:
    """One source of a release; one that is refused is said in the row, the others go on."""
    try:
        with transaction.atomic():
            call()
    except IngestError as error:
        row.notes.append(error.message)


def markdown(result: Backtest) -> str:
    """The table and its totals as Markdown (a release's sentences escaped as text)."""

    def cell(text: object) -> str:
        return re.sub(r"([\\`*_\[\]<>|])", r"\\\1", " ".join(str(text).split()))

    lines = [
        f"### Backtest: {cell(result.service)}, policy version {result.policy_version}",
        "",
        "| release | range | commits | severity | raised by |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in result.rows:
        why = "<br>".join(f"**{s.name}** ({s.level}): {cell(s.detail)}" for s in row.raised)
        notes = "<br>".join(f"_{cell(n)}_" for n in row.notes)
        lines.append(
            f"| {cell(row.version)} | {cell(row.from_tag)}..{cell(row.to_tag)} | {row.commits} "
            f"| {row.severity} | {'<br>'.join(p for p in (why, notes) if p) or '-'} |"
        )
    counts = result.severities()
    lines += [
        "",
        f"**{len(result.rows)} releases:** {counts['high']} high, {counts['medium']} medium, "
        f"{counts['low']} low."
        + (f" Not given, so not judged: {result.not_given_said()}." if result.not_given else ""),
        "",
        "| signal | releases it raised |",
        "| --- | --- |",
        *(f"| {name} | {count} |" for name, count in result.signals_fired().items()),
    ]
    return "\n".join(lines) + "\n"
