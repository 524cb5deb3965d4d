"""What a release's service did before it, as plain facts: the history-aware signals of the risk
policy read these, and the agent's drill-downs show them.

Plain Python (no Django): `sources.history` computes a `History` from the detail tables (commits,
test cases, metric samples), and `sources.judging.judge_release` hands it to the policy. A
release without detail has `History.empty()`, and the policy then reads the summary alone, as
it did before histories existed.

"Earlier releases" are the same service's, by deploy order (creation order for a release that
was never deployed), most recent first; "recent" means the last `window` of them (the policy's
`history_releases`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any, Literal

from risk.changes import CODE_KINDS, CommitFacts, FileKind, FileTouch, commit_facts, file_kind
from risk.suspects import Suspect

TestOutcome = Literal["passed", "failed", "skipped", "flaky"]


@dataclass(frozen=True, slots=True)
class ReleaseRef:
    """An earlier release of the service: which, and when it went out (or was created)."""

    id: int
    version: str
    at: datetime


@dataclass(frozen=True, slots=True)
class TestHistory:
    """One test (by its label, `classname::name`) in this release and in the service's past."""

    __test__ = False  # a record, whatever pytest thinks of its name

    label: str
    file: str
    suite: str
    # How its last attempt in this release went; "flaky": it passed after failing.
    outcome: TestOutcome
    # Failed and passed in this release (a rerun passed, or JUnit's flakyFailure).
    flaky_here: bool
    # The earliest release of the service it failed in: an earlier one, else this one when it
    # fails here, else None.
    first_failed_in: str | None = None
    # It failed in an earlier release of the service (any, not only the recent ones).
    failed_before: bool = False
    # How it went in each of the recent earlier releases that ran it, most recent first:
    # (version, outcome), where "flaky" is failed and passed within that release.
    recent: tuple[tuple[str, TestOutcome], ...] = ()
    # The commits of the release that may have caused its failure here, most likely first
    # (risk/suspects.py), where a checkout let them be computed.
    suspects: tuple[Suspect, ...] = ()
    # The suspects were computed for its failure here (none found included): the evidence of
    # a critical area is then the suspect's path, never the test's name (risk/policy.py).
    suspects_computed: bool = False
    # Its file was renamed in this release (git's status R): the file's old path, under whose
    # classname its earlier results were read. Said in its sentence, since the history
    # follows the rename silently otherwise.
    renamed_from: str = ""
    # Its attempts that failed in this release: 2 or more with none passed is a rerun that
    # failed too (Surefire's rerunFailure), which no flakiness excuses.
    failed_runs: int = 0
    # Its failure here errored in setup (pytest's "failed on setup with ..."): the test's own
    # code never ran; a fixture, the database or a migration broke first.
    setup_error: bool = False

    @property
    def failed_here(self) -> bool:
        return self.outcome == "failed"

    @property
    def failed_every_rerun(self) -> bool:
        """Rerun in this release and failed every time: not the flakiness a rerun excuses."""
        return self.outcome == "failed" and self.failed_runs >= 2 and not self.flaky_here

    @property
    def recent_releases(self) -> int:
        return len(self.recent)

    @property
    def failed_in_versions(self) -> tuple[str, ...]:
        return tuple(v for v, outcome in self.recent if outcome in ("failed", "flaky"))

    @property
    def failed_in_recent(self) -> int:
        return len(self.failed_in_versions)

    @property
    def flaky_in_recent(self) -> int:
        return sum(outcome == "flaky" for _, outcome in self.recent)

    @property
    def failure_runs(self) -> int:
        """Separate stretches of failing releases among the recent ones: failing on and off
        makes several, a failure that was fixed (and perhaps comes back now) one."""
        runs, failing = 0, False
        for _, outcome in self.recent:
            now_failing = outcome in ("failed", "flaky")
            runs += now_failing and not failing
            failing = now_failing
        return runs


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str
    added: int
    deleted: int
    binary: bool = False
    # What the git reader found at the release's head (risk/changes.py's `file_kind`).
    generated: bool = False
    vendored: bool = False

    @property
    def kind(self) -> FileKind:
        return file_kind(self.path, generated=self.generated, vendored=self.vendored)

    @property
    def directory(self) -> str:
        parent = str(PurePosixPath(self.path).parent)
        return "" if parent == "." else parent

    @property
    def subsystem(self) -> str:
        """Kamei et al.'s subsystem: the top-level directory ("" for a file at the root)."""
        parts = PurePosixPath(self.path).parts
        return parts[0] if len(parts) > 1 else ""


@dataclass(frozen=True, slots=True)
class AuthorFacts:
    """One author of the release's commits and what they had touched before in the service."""

    author: str
    commits: int
    files: tuple[str, ...]
    # The files and directories of this release they had never committed to in the service's
    # earlier releases.
    new_files: tuple[str, ...]
    new_directories: tuple[str, ...]
    # Their commits in the service's earlier releases.
    earlier_commits: int

    @property
    def new_to_all_files(self) -> bool:
        return bool(self.files) and len(self.new_files) == len(self.files)


@dataclass(frozen=True, slots=True)
class ChangeFacts:
    """The change's size and spread: Kamei et al.'s just-in-time defect metrics over the
    release's commits (merges left out), and who made it."""

    commits: int
    files: tuple[FileChange, ...]
    # Commit messages (subject and body, cut to a bounded length), for what titles leave out.
    messages: tuple[str, ...] = ()
    authors: tuple[AuthorFacts, ...] = ()
    # Were there earlier commits in the service at all? Without them everyone is "new".
    service_has_earlier_commits: bool = False
    # Each commit (merges too) with its kind, bot flag and files (risk/changes.py).
    commit_list: tuple[CommitFacts, ...] = ()
    # (code lines, code files, code directories) of each recent earlier release with commits,
    # most recent first: what "large for this service" is judged against.
    earlier_code_sizes: tuple[tuple[int, int, int], ...] = ()

    @property
    def code_files(self) -> tuple[FileChange, ...]:
        """The files whose lines are the change's size: code and schema, not lock files,
        manifests, vendored or generated files, tests and their data, docs, CI or examples."""
        return tuple(f for f in self.files if f.kind in CODE_KINDS)

    @property
    def code_lines(self) -> int:
        return sum(f.added + f.deleted for f in self.code_files)

    @property
    def code_directories(self) -> tuple[str, ...]:
        return tuple(sorted({f.directory for f in self.code_files}))

    @property
    def lines_added(self) -> int:  # LA
        return sum(f.added for f in self.files)

    @property
    def lines_deleted(self) -> int:  # LD
        return sum(f.deleted for f in self.files)

    @property
    def lines(self) -> int:
        return self.lines_added + self.lines_deleted

    @property
    def file_count(self) -> int:  # NF
        return len(self.files)

    @property
    def directories(self) -> tuple[str, ...]:  # ND
        return tuple(sorted({f.directory for f in self.files}))

    @property
    def subsystems(self) -> tuple[str, ...]:  # NS
        return tuple(sorted({f.subsystem for f in self.files}))

    @property
    def entropy(self) -> float:
        """How evenly the changed lines spread over the files, from 0 (all in one file) to 1
        (the same in each): Shannon's entropy of the lines' distribution over the files,
        divided by its largest value, log2 of the file count (Kamei et al.'s normalisation)."""
        return spread_entropy([f.added + f.deleted for f in self.files])

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)

    def new_authors(self) -> list[AuthorFacts]:
        """Authors new to every file they changed here, when the service has a past to be new
        to."""
        if not self.service_has_earlier_commits:
            return []
        return [a for a in self.authors if a.new_to_all_files]


def spread_entropy(lines_per_file: Iterable[int]) -> float:
    counts = [n for n in lines_per_file if n > 0]
    total = sum(counts)
    if len(counts) < 2 or total == 0:
        return 0.0
    entropy = -sum((n / total) * math.log2(n / total) for n in counts)
    return min(1.0, entropy / math.log2(len(counts)))


@dataclass(frozen=True, slots=True)
class MetricSeries:
    """One metric's samples: this release's window, its baseline window, and the release
    windows of the recent earlier releases (most recent first)."""

    name: str
    release: tuple[float, ...]
    baseline: tuple[float, ...] = ()
    recent: tuple[tuple[str, tuple[float, ...]], ...] = ()

    def recent_pooled(self) -> tuple[float, ...]:
        return tuple(value for _, values in self.recent for value in values)

    def comparison(self, min_samples: int = 1) -> tuple[tuple[float, ...], str]:
        """What this release is compared with, and in words: its own baseline window when it
        has `min_samples` in it, else the release windows of the recent releases when they
        have them (a previous release replaced within minutes leaves a baseline of 2 or 3
        samples: tenacity 9.1.2 came 3 minutes after 9.1.1), else what there is."""
        recent_enough = bool(self.recent) and len(self.recent_pooled()) >= min_samples
        if self.baseline and (len(self.baseline) >= min_samples or not recent_enough):
            return self.baseline, "the baseline window"
        if self.recent:
            count = len(self.recent)
            return self.recent_pooled(), (
                f"the last {count} release{'s' if count != 1 else ''}"
                if count != 1
                else "the previous release"
            )
        return (), "no baseline"


@dataclass(frozen=True, slots=True)
class History:
    service: str
    version: str
    # The earlier releases of the service looked at (the last `window`), most recent first.
    previous: tuple[ReleaseRef, ...] = ()
    tests: tuple[TestHistory, ...] = ()
    changes: ChangeFacts | None = None
    metrics: tuple[MetricSeries, ...] = ()
    window: int = 10
    # Test results were ingested for this release (JUnit): its failures have a history.
    has_test_detail: bool = False
    # (version, tests that ran) of each recent earlier release with test results, most recent
    # first: what "the usual number of tests" is judged against (risk/run_counts.py).
    earlier_test_counts: tuple[tuple[str, int], ...] = ()

    @classmethod
    def empty(cls) -> History:
        return cls(service="", version="")

    @property
    def is_empty(self) -> bool:
        return not (self.tests or self.changes or self.metrics or self.has_test_detail)

    def test(self, label: str) -> TestHistory | None:
        return next((t for t in self.tests if t.label == label), None)

    def metric(self, name: str) -> MetricSeries | None:
        return next((m for m in self.metrics if m.name == name), None)

    def failing(self) -> list[TestHistory]:
        return [t for t in self.tests if t.failed_here]


EMPTY = History.empty()


def _record_kind(record: Any) -> FileKind:
    return file_kind(
        record.path,
        generated=getattr(record, "generated", False),
        vendored=getattr(record, "vendored", False),
    )


def _touch(record: Any) -> FileTouch:
    """A `FileTouch` from a file record (`detective_client.records.FileChangeRecord`)."""
    return FileTouch(
        path=record.path,
        added=record.added or 0,
        deleted=record.deleted or 0,
        old_path=record.old_path or "",
        generated=getattr(record, "generated", False),
        vendored=getattr(record, "vendored", False),
        removed=getattr(record, "removed", False),
    )


def _code_size(commits: Iterable[Any]) -> tuple[int, int, int]:
    lines, files = 0, set()
    for commit in commits:
        if len(commit.parents) > 1:
            continue
        for f in commit.files:
            if _record_kind(f) in CODE_KINDS:
                lines += (f.added or 0) + (f.deleted or 0)
                files.add(f.path)
    return lines, len(files), len({FileChange(p, 0, 0).directory for p in files})


def change_facts_from(
    commits: Iterable[Any], earlier_releases: Iterable[Iterable[Any]] = ()
) -> ChangeFacts | None:
    """A release's `ChangeFacts` from commit records (`detective_client.records.CommitRecord`
    or anything with its fields), and its service's earlier releases' records, oldest first:
    what `sources.history.change_facts` reads from the tables, for readers without them."""
    commits = list(commits)
    earlier = [list(release) for release in earlier_releases]
    kept = [c for c in commits if len(c.parents) <= 1]
    if not kept:
        return None
    lines: dict[str, list[int]] = {}
    flags: dict[str, tuple[bool, bool]] = {}
    for commit in kept:
        for f in commit.files:
            counted = lines.setdefault(f.path, [0, 0])
            counted[0] += f.added or 0
            counted[1] += f.deleted or 0
            was = flags.get(f.path, (False, False))
            flags[f.path] = (
                was[0] or getattr(f, "generated", False),
                was[1] or getattr(f, "vendored", False),
            )
    touched: dict[str, set[str]] = {}
    for release in earlier:
        for commit in release:
            touched.setdefault(commit.author_email or commit.author_name, set()).update(
                f.path for f in commit.files
            )
    mine: dict[str, list[Any]] = {}
    for commit in kept:
        mine.setdefault(commit.author_email or commit.author_name, []).append(commit)
    authors = []
    for key, theirs in sorted(mine.items()):
        paths = sorted({f.path for c in theirs for f in c.files})
        before = touched.get(key, set())
        known_dirs = {FileChange(p, 0, 0).directory for p in before}
        authors.append(
            AuthorFacts(
                author=theirs[0].author_name or key,
                commits=len(theirs),
                files=tuple(paths),
                new_files=tuple(p for p in paths if p not in before),
                new_directories=tuple(
                    sorted({FileChange(p, 0, 0).directory for p in paths} - known_dirs)
                ),
                earlier_commits=sum(
                    1 for r in earlier for c in r if (c.author_email or c.author_name) == key
                ),
            )
        )
    return ChangeFacts(
        commits=len(kept),
        files=tuple(
            FileChange(p, a, d, generated=flags[p][0], vendored=flags[p][1])
            for p, (a, d) in sorted(lines.items())
        ),
        messages=tuple(c.message[:1000] for c in kept)[:200],
        authors=tuple(authors),
        service_has_earlier_commits=any(earlier),
        commit_list=tuple(
            commit_facts(
                sha=c.sha,
                author_name=c.author_name,
                author_email=c.author_email,
                message=c.message,
                parents=len(c.parents),
                files=[_touch(f) for f in c.files],
            )
            for c in commits
        ),
        earlier_code_sizes=tuple(_code_size(r) for r in reversed(earlier) if r),
    )


__all__ = [
    "EMPTY",
    "AuthorFacts",
    "ChangeFacts",
    "FileChange",
    "History",
    "MetricSeries",
    "ReleaseRef",
    "TestHistory",
    "change_facts_from",
    "spread_entropy",
]
