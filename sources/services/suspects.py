"""Suspect commits for a release's failed tests, stored on each failed test case: computed where
a checkout of the repository is at hand (`manage.py ingest --git-repo`, `compute_suspects`), or
from what the CI client sent from its checkout (`rank_stored`: hunks and the head's facts).

The checkout gives what stored rows cannot: the paths and sources at the head (a test's
imports, a module's functions) and `git blame`, which is exact across merged branches where
carrying hunks forward is not (docs/decisions/2026-11-27-suspect-commits.md). The ranking
itself is plain Python (risk/suspects.py); this module only gathers its inputs.
"""

from __future__ import annotations

import heapq
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from django.db import transaction

from detective_client import git
from detective_client.hunks import (
    MAX_HUNKS,
    FileHunks,
    Hunk,
    HunkRange,
    blame_at_head,
    read_hunks,
)
from detective_client.imports import import_graph
from detective_client.scopes import scopes_of
from risk import suspect_reach as reach
from risk import suspects as ranking
from risk.schema_evidence import schema_error
from sources import summary
from sources.models import Commit, CommitFile, Release, ReleaseHead, TestCase, TestStatus
from sources.parsers.tracebacks import read_frames

MAX_SUSPECTS = 5
MAX_FRAMES = 30  # of a failure's frames, kept in the order its text gives them
MAX_RANGES = 20  # changed line ranges kept per suspect
# Failures whose suspects are computed in one release: each may cost a `git blame` per path it
# needs, so a release with thousands of failures is ranked for its first ones only.
MAX_FAILURES = 200


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise git.GitError(done.stderr.strip() or f"git {args[0]} failed")
    return done.stdout


def _source_at(repo: Path, head: str, path: str) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(repo), "show", f"{head}:{path}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None


def _scopes(path: str, text: str) -> list[ranking.Scope]:
    """A module's functions at the head: Python's by `ast`, others' by tree-sitter."""
    if path.endswith(".py"):
        return ranking.python_scopes(text)
    reader = scopes_of(path)
    return [ranking.sent_scope(*found) for found in reader(text)] if reader else []


def stored_form(
    failure: ranking.Failure,
    ranked: list[ranking.Suspect],
    at: dict[str, list[ranking.ChangedRange]],
) -> dict[str, Any]:
    """What a failed test case keeps: its suspects (`ranked`, most likely first), the frames
    its text was read into, and each suspect's changed lines at the head in the paths the
    failure needs (the drill-down's evidence for the ranking)."""
    needed = set(failure.exercised) | {f.path for f in failure.frames if f.in_repo}
    needed |= set(ranking.test_files(failure.test_path, failure.frames))
    suspects = {s.sha for s in ranked}
    lines: dict[str, list[list[Any]]] = {}
    for path in sorted(needed):
        for r in at.get(path, []):
            if r.sha in suspects and len(lines.setdefault(r.sha, [])) < MAX_RANGES:
                lines[r.sha].append([r.path, r.start, r.end, r.deleted])
    return {
        "test_path": failure.test_path,
        "ranked": [asdict(s) for s in ranked],
        "frames": [asdict(f) for f in failure.frames[:MAX_FRAMES]],
        "lines": lines,
    }


def compute_suspects(
    release: Release, repo: Path, rev_range: str, hunks: HunkRange | None = None
) -> int:
    """Ranks the suspects of each failed test case of `release` and stores them; returns how
    many failures got at least one suspect. `hunks`: the range's, when the caller read them
    already (`read_hunks` with its default bound), so the log is not read twice."""
    failed = list(
        release.test_cases.filter(status__in=[TestStatus.FAILED, TestStatus.ERROR]).order_by(
            "suite", "classname", "name", "attempt"
        )[:MAX_FAILURES]
    )
    if not failed:
        return 0
    _, end = git.split_range(rev_range)
    head = git.resolve(repo, end)
    paths = _git(repo, "ls-tree", "-r", "--name-only", head).splitlines()
    if hunks is None:
        hunks = read_hunks(repo, rev_range, limit=MAX_HUNKS)
    records = {c.sha: c for c in release.commits.all()}
    commits = [
        ranking.RangeCommit(
            sha=h.sha,
            subject=records[h.sha].subject if h.sha in records else "",
            author=records[h.sha].author_name if h.sha in records else "",
            files=h.files,
        )
        for h in hunks.commits
    ]
    carried = ranking.lines_at_head(commits)
    sources: dict[str, str | None] = {}

    def source(path: str) -> str | None:
        if path not in sources:
            sources[path] = _source_at(repo, head, path)
        return sources[path]

    blamed_paths: set[str] = set()
    read_cases = []
    for case in failed:
        frames = read_frames(case.traceback or case.failure_message, paths)
        test_path = ranking.file_of_test_case(case.classname, case.file, paths, case.suite, frames)
        read_cases.append((case, frames, test_path, ranking.test_files(test_path, frames)))
    starts = sorted({t for *_, tests in read_cases for t in tests})

    def read_many(wanted: list[str] | tuple[str, ...]) -> dict[str, str]:
        return {p: text for p in wanted if (text := source(p)) is not None}

    edges, _ = import_graph(starts, paths, read_many, ranking.is_test_file)
    names_of = {path: [f"/{p}" for p in found] for path, found in edges.items()}
    prepared: list[tuple[TestCase, ranking.Failure]] = []
    for case, frames, test_path, tests in read_cases:
        distances = reach.import_distances(tests, names_of, paths)
        named: frozenset[str] = frozenset()
        for t in tests:
            named |= ranking.namesakes(t, paths)
        called = reach.called_names(case.traceback or case.failure_message)
        if test_path.endswith(".py"):
            called |= reach.calls_in_test(source(test_path) or "", case.name)
        failure = ranking.Failure(
            test_path=test_path,
            frames=frames,
            exercised=frozenset(p for p in distances if p not in tests),
            namesakes=named,
            names=ranking.message_names(case.failure_message),
            distances=distances,
            test_name=case.name,
            called=called,
            schema_error=schema_error(f"{case.failure_message}\n{case.traceback}"),
        )
        prepared.append((case, failure))
        blamed_paths |= set(tests) | set(failure.exercised)
        blamed_paths |= {f.path for f in frames if f.in_repo}
    blamed = blame_at_head(repo, rev_range, sorted(p for p in blamed_paths if p in set(paths)))
    at = ranking.with_blame(carried, blamed)
    found = 0
    with transaction.atomic():
        for case, failure in prepared:
            scopes = {p: _scopes(p, source(p) or "") for p in failure.exercised}
            ranked = ranking.rank_suspects(failure, commits, at, scopes=scopes)[:MAX_SUSPECTS]
            case.suspects = stored_form(failure, ranked, at)
            found += bool(ranked)
        TestCase.objects.bulk_update([case for case, _ in prepared], ["suspects"])
    summary.rank_changes_again(release)
    return found


# ---- from stored rows: a release sent by the CI client or the API --------------------------


def _newest_first(commits: list[Commit]) -> list[Commit]:
    """Children before their parents (what `lines_at_head` carries lines forward in), the
    newest first among those ready: the stored rows' order is by date, which a branch merged
    late contradicts."""
    in_range = {c.sha: c for c in commits}
    children = dict.fromkeys(in_range, 0)
    for commit in commits:
        for parent in commit.parents:
            if parent in children:
                children[parent] += 1
    ready = [(-c.authored_at.timestamp(), c.sha) for c in commits if children[c.sha] == 0]
    heapq.heapify(ready)
    ordered: list[Commit] = []
    while ready:
        _, sha = heapq.heappop(ready)
        commit = in_range[sha]
        ordered.append(commit)
        for parent in commit.parents:
            if parent in children:
                children[parent] -= 1
                if children[parent] == 0:
                    heapq.heappush(ready, (-in_range[parent].authored_at.timestamp(), parent))
    seen = {c.sha for c in ordered}  # a cycle cannot come from git; kept whole if sent
    return ordered + [c for c in commits if c.sha not in seen]


def rank_stored(release: Release) -> int | None:
    """Ranks the suspects of each failed test case of `release` from its stored rows: the
    commits' hunks and the head's facts the CI client sent (`ReleaseHead`). Run after every
    ingestion of commits or JUnit, so the order they arrive in does not matter, and idempotent
    (the same rows rank the same). None, storing nothing, when no hunks are stored (a release
    from `manage.py ingest --git-repo` is ranked from its checkout, `compute_suspects`);
    else how many failures got at least one suspect."""
    files = list(
        CommitFile.objects.filter(commit__release=release, hunks__isnull=False).values_list(
            "commit__sha", "path", "old_path", "hunks"
        )
    )
    if not files:
        return None
    failed = list(
        release.test_cases.filter(status__in=[TestStatus.FAILED, TestStatus.ERROR]).order_by(
            "suite", "classname", "name", "attempt"
        )[:MAX_FAILURES]
    )
    if not failed:
        return None
    by_sha: dict[str, list[FileHunks]] = {}
    for sha, path, old_path, hunks in files:
        by_sha.setdefault(sha, []).append(
            FileHunks(path, old_path or None, tuple(Hunk(*h) for h in hunks))
        )
    stored = _newest_first(list(release.commits.all()))
    commits = [
        ranking.RangeCommit(c.sha, c.subject, c.author_name, tuple(by_sha.get(c.sha, ())))
        for c in stored
    ]
    head = ReleaseHead.objects.filter(release=release).first()
    changed = {p for _, p, _, _ in files}
    if head is None:
        stored_forms = rank_from_head(failed, commits, {}, {}, {}, changed)
    else:
        stored_forms = rank_from_head(failed, commits, head.tests, head.blame, head.scopes, changed)
    found = 0
    with transaction.atomic():
        for case, kept in zip(failed, stored_forms, strict=True):
            case.suspects = kept
            found += bool(kept["ranked"])
        TestCase.objects.bulk_update(failed, ["suspects"], batch_size=500)
    summary.rank_changes_again(release)
    return found


class CaseLike(Protocol):
    """A failed test case as a JUnit report gives it (`TestCase`, or one read in a benchmark)."""

    @property
    def suite(self) -> str: ...
    @property
    def classname(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def file(self) -> str | None: ...
    @property
    def failure_message(self) -> str: ...
    @property
    def traceback(self) -> str: ...


def rank_from_head(
    cases: Sequence[CaseLike],
    commits: Sequence[ranking.RangeCommit],
    tests: Mapping[str, Sequence[str]],
    blame: Mapping[str, Sequence[Sequence[Any]]],
    functions: Mapping[str, Sequence[Sequence[Any]]],
    changed: Iterable[str],
) -> list[dict[str, Any]]:
    """Each case's stored suspects (`stored_form`), from the range's commits with their hunks
    (newest first) and the head's facts as the CI client sent them (`HeadRecord`'s `tests`,
    `blame`, `scopes`); `changed`: the paths the range changed."""
    scopes = {
        path: [ranking.sent_scope(start, end, words) for start, end, words in found]
        for path, found in functions.items()
    }
    blamed = [
        ranking.ChangedRange(path, start, end, sha)
        for path, ranges in blame.items()
        for start, end, sha in ranges
    ]
    at = ranking.with_blame(ranking.lines_at_head(commits), blamed)
    # The paths the ranking can name: those the range changed, the test files and the blamed,
    # and those the import graph reached.
    graph = {n[1:] for names in tests.values() for n in names if n.startswith("/")}
    paths = sorted(set(changed) | set(tests) | set(blame) | graph)
    out: list[dict[str, Any]] = []
    defined = {s.name for found in scopes.values() for s in found if s.name}
    for case in cases:
        text = case.traceback or case.failure_message
        frames = read_frames(text, paths)
        test_path = ranking.file_of_test_case(case.classname, case.file, paths, case.suite, frames)
        starts = ranking.test_files(test_path, frames)
        called = reach.called_names(text) | reach.calls_near(
            tests.get(test_path, ()), [f.line for f in frames if f.path == test_path]
        )
        distances = reach.import_distances(starts, tests, paths)
        if not starts:
            distances = reach.defining_modules(called, scopes)
        named: frozenset[str] = frozenset()
        for t in starts:
            named |= ranking.namesakes(t, paths)
        failure = ranking.Failure(
            test_path=test_path,
            frames=frames,
            exercised=frozenset(p for p in distances if p not in starts),
            namesakes=named,
            names=ranking.message_names(case.failure_message)
            | reach.parameter_names(case.name, defined),
            distances=distances,
            test_name=case.name,
            called=called,
            schema_error=schema_error(f"{case.failure_message}\n{case.traceback}"),
        )
        ranked = ranking.rank_suspects(failure, commits, at, scopes=scopes)[:MAX_SUSPECTS]
        out.append(stored_form(failure, ranked, at))
    return out
