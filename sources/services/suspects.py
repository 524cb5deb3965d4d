"""Suspect commits for a release's failed tests, computed where a checkout of the repository is
at hand (`manage.py ingest --git-repo`), and stored on each failed test case.

The checkout gives what stored rows cannot: the paths and sources at the head (a test's
imports, a module's functions) and `git blame`, which is exact across merged branches where
carrying hunks forward is not (docs/decisions/2026-11-27-suspect-commits.md). The ranking
itself is plain Python (risk/suspects.py); this module only gathers its inputs.
"""

from __future__ import annotations

import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.db import transaction

from detective_client import git
from detective_client.hunks import MAX_HUNKS, blame_at_head, read_hunks
from risk import suspects as ranking
from sources.models import Release, TestCase, TestStatus
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


def compute_suspects(release: Release, repo: Path, rev_range: str) -> int:
    """Ranks the suspects of each failed test case of `release` and stores them; returns how
    many failures got at least one suspect."""
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
    prepared: list[tuple[TestCase, ranking.Failure]] = []
    for case in failed:
        test_path = ranking.file_of_test_case(case.classname, case.file, paths)
        text = case.traceback or case.failure_message
        frames = read_frames(text, paths)
        tests = ranking.test_files(test_path, frames)
        exercised: frozenset[str] = frozenset()
        named: frozenset[str] = frozenset()
        for t in tests:
            exercised |= ranking.exercised_paths(t, source(t), paths)
            named |= ranking.namesakes(t, paths)
        failure = ranking.Failure(
            test_path=test_path,
            frames=frames,
            exercised=exercised,
            namesakes=named,
            names=ranking.message_names(case.failure_message),
        )
        prepared.append((case, failure))
        blamed_paths |= set(tests) | set(exercised)
        blamed_paths |= {f.path for f in frames if f.in_repo}
    blamed = blame_at_head(repo, rev_range, sorted(p for p in blamed_paths if p in set(paths)))
    at = ranking.with_blame(carried, blamed)
    found = 0
    with transaction.atomic():
        for case, failure in prepared:
            scopes = {
                p: ranking.python_scopes(source(p) or "")
                for p in failure.exercised
                if p.endswith(".py")
            }
            ranked = ranking.rank_suspects(failure, commits, at, scopes=scopes)[:MAX_SUSPECTS]
            case.suspects = stored_form(failure, ranked, at)
            found += bool(ranked)
        TestCase.objects.bulk_update([case for case, _ in prepared], ["suspects"])
    return found
