"""The line ranges each commit of a range changed, per file, from `git log -p -U0` hunks.

What a failure's frames are matched against (issue 30): not how many lines a commit changed but
which. Decisions:
- `-U0`: a hunk is exactly the lines removed (old numbering, in the parent) and added (new
  numbering, in the commit), with no context lines to blur them.
- Renames are followed (`-M`): a file's hunks carry its new path and the old one.
- Merge commits give no hunks (`--diff-merges=off`), as in `git.py`: the merged commits carry them.
- Binary files give none (git prints no hunk for them), and neither do lock files and generated
  or minified files (`skipped_file`): their lines are no code a frame runs through, and a lock
  file's hunks alone can outnumber the rest of a release's.
- Bounded: at most `MAX_HUNKS` hunks a range (newest first, in `--topo-order`);
  past it the reading stops and `HunkRange.truncated` says so. The output is read line by line
  and a hunk's body is never kept, so a vendored 100,000-line file costs one header.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from detective_client.commit_graph import graph_environment
from detective_client.git import EmptyRange, GitError, resolve, split_range

__all__ = [
    "MAX_HUNKS",
    "BlamedLines",
    "CommitHunks",
    "FileHunks",
    "Hunk",
    "HunkRange",
    "blame_at_head",
    "parse_blame_porcelain",
    "parse_log_patch",
    "read_hunks",
    "skipped_file",
]

MAX_HUNKS = 50_000
_GRAPH_FROM = 8  # blamed paths from which a commit-graph is written for them
_COMMIT_MARK = "\x1ecommit "
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_LOCK_FILES = frozenset(
    {
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lockb",
        "poetry.lock",
        "uv.lock",
        "pipfile.lock",
        "pdm.lock",
        "cargo.lock",
        "gemfile.lock",
        "composer.lock",
        "go.sum",
        "mix.lock",
        "podfile.lock",
        "packages.lock.json",
        "gradle.lockfile",
    }
)
_GENERATED_SUFFIXES = (".min.js", ".min.css", ".map", ".pb.go", "_pb2.py", ".snap")


@dataclass(frozen=True)
class Hunk:
    """Lines `old_start`.. (`old_count` of them) of the parent became `new_start`.. in the commit.

    A count of 0 is a pure addition (old side) or deletion (new side); git then gives the line
    before which the change sits as the start.
    """

    old_start: int
    old_count: int
    new_start: int
    new_count: int


@dataclass(frozen=True)
class FileHunks:
    path: str
    old_path: str | None
    hunks: tuple[Hunk, ...]


@dataclass(frozen=True)
class CommitHunks:
    sha: str
    files: tuple[FileHunks, ...]


@dataclass(frozen=True)
class HunkRange:
    commits: tuple[CommitHunks, ...]
    truncated: bool = False
    skipped_files: tuple[str, ...] = field(default=())


def skipped_file(path: str) -> bool:
    """A lock file, or a generated or minified one: no hunks are kept for it."""
    name = path.rsplit("/", 1)[-1].lower()  # a git path: no trailing slash
    return name in _LOCK_FILES or name.endswith(_GENERATED_SUFFIXES)


def _unquote(path: str) -> str:
    # git quotes a path with a tab, newline, quote or backslash in it, C-style.
    if len(path) >= 2 and path[0] == path[-1] == '"':
        return path[1:-1].encode("latin-1", "backslashescape").decode("unicode_escape")
    return path


def _side(line: str, prefix: str) -> str | None:
    value = _unquote(line[4:].rstrip("\t"))
    if value == "/dev/null":
        return None
    return value[len(prefix) :] if value.startswith(prefix) else value


class _Builder:
    def __init__(self, limit: int) -> None:
        self.commits: list[CommitHunks] = []
        self.skipped: set[str] = set()
        self.count = 0
        self.limit = limit
        self.truncated = False
        self._sha: str | None = None
        self._files: list[FileHunks] = []
        self._path: str | None = None
        self._old: str | None = None
        self._hunks: list[Hunk] = []
        self._skip = False  # the file's hunks are not kept (`skipped_file`), known once a file
        # Between `diff --git` and the first `@@`: a body line `--- x` is a removed `-- x`.
        self._in_header = False

    def _close_file(self) -> None:
        if self._path is not None and self._hunks:
            old = self._old if self._old != self._path else None
            self._files.append(FileHunks(self._path, old, tuple(self._hunks)))
        self._path, self._old, self._hunks = None, None, []

    def close_commit(self) -> None:
        self._close_file()
        if self._sha is not None:
            self.commits.append(CommitHunks(self._sha, tuple(self._files)))
        self._sha, self._files = None, []

    def feed(self, line: str) -> bool:
        """Read one line of the log; False once the bound is reached."""
        if line.startswith(_COMMIT_MARK):
            self.close_commit()
            self._sha = line[len(_COMMIT_MARK) :].strip()
        elif line.startswith("diff --git "):
            self._close_file()
            self._in_header = True
        elif self._in_header and line.startswith("--- "):
            self._old = _side(line, "a/")
        elif self._in_header and line.startswith("+++ "):
            path = _side(line, "b/")
            # A deleted file's hunks are in the old numbering only; it keeps its old path.
            self._path = path if path is not None else self._old
            self._skip = self._path is not None and skipped_file(self._path)
        elif line.startswith("@@ ") and self._path is not None:
            self._in_header = False
            if self._skip:
                self.skipped.add(self._path)
                return True
            hit = _HUNK.match(line)
            if hit is None:
                return True
            if self.count >= self.limit:
                # The commit being read is dropped whole: part of its hunks would read as all.
                self.truncated = True
                self._sha, self._files, self._path = None, [], None
                return False
            old_start, old_count, new_start, new_count = hit.groups()
            self._hunks.append(
                Hunk(
                    int(old_start),
                    1 if old_count is None else int(old_count),
                    int(new_start),
                    1 if new_count is None else int(new_count),
                )
            )
            self.count += 1
        return True


def parse_log_patch(lines: Iterable[str], limit: int = MAX_HUNKS) -> HunkRange:
    """Hunks from the text of `git log -p -U0 --format=%x1ecommit %H`, newest commit first."""
    builder = _Builder(limit)
    for line in lines:
        if not builder.feed(line.rstrip("\n")):
            break
    builder.close_commit()
    return HunkRange(tuple(builder.commits), builder.truncated, tuple(sorted(builder.skipped)))


# The only lines `_Builder.feed` reads; a hunk's body (`+`, `-`, ` ` or `\\` lines, most of
# the output: pallets/click's 3,261 commits give 442,432 lines, 37,126 of them these) is left
# out by `bytes.startswith` before any line is decoded or handed to Python code one by one.
_READ_PREFIXES = (b"\x1ecommit ", b"diff --git ", b"--- ", b"+++ ", b"@@ ")
_CHUNK = 1 << 20


def _header_lines(stream: IO[bytes]) -> Iterator[str]:
    """The lines of `stream` that `_Builder.feed` reads, in order, read a chunk at a time (a
    vendored file's body is never held whole)."""
    rest = b""
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            break
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if line.startswith(_READ_PREFIXES):
                yield line.decode("utf-8", errors="replace")
    if rest.startswith(_READ_PREFIXES):
        yield rest.decode("utf-8", errors="replace")


def _stream(repo: Path, args: list[str]) -> Iterator[str]:
    command = ["git", "-C", str(repo), "-c", "core.quotepath=off", *args]
    environment = {**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment
        )
    except FileNotFoundError:
        raise GitError("the git command is not installed or not on PATH") from None
    assert process.stdout is not None
    read_all = False
    try:
        yield from _header_lines(process.stdout)
        read_all = True
    finally:
        process.stdout.close()
        if process.poll() is None:
            process.kill()
        _, error = process.communicate()
        # Stopped at the bound, git is killed or dies of the closed pipe: no error of its own.
        if read_all and process.returncode not in (0, -9):
            raise GitError(f"git log -p failed: {error.decode(errors='replace').strip()}")


def read_hunks(repo: Path, rev_range: str, limit: int = MAX_HUNKS) -> HunkRange:
    """The hunks of every commit of `rev_range` ('FROM..TO' or one ref), newest first."""
    repo = Path(repo)
    start, end = split_range(rev_range)
    end_sha = resolve(repo, end)
    selection = [end_sha] if start is None else [f"^{resolve(repo, start)}", end_sha]
    args = [
        "log",
        "-p",
        "-U0",
        "-M",
        # Children before their parents, whatever the dates say: a branch forked mid-release
        # and merged at the end is numbered after its fork point, and `lines_at_head` carries
        # lines forward in this order.
        "--topo-order",
        "--diff-merges=off",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--format=%x1ecommit %H",
        "--end-of-options",
        *selection,
    ]
    found = parse_log_patch(_stream(repo, args), limit)
    if not found.commits:
        raise EmptyRange(rev_range)
    return found


@dataclass(frozen=True)
class BlamedLines:
    """Lines `start`..`end` of `path` at the range's end were last changed by `sha`, a commit of
    the range."""

    path: str
    start: int
    end: int
    sha: str


_BLAME_HEADER = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64}) \d+ (\d+) (\d+)$")


def parse_blame_porcelain(path: str, lines: Iterable[str]) -> list[BlamedLines]:
    """Groups of `git blame --porcelain FROM..TO` owned by commits of the range (the boundary
    commit, which stands for everything older, is left out)."""
    groups: list[tuple[str, int, int]] = []
    boundary: set[str] = set()
    current: str | None = None
    for raw in lines:
        line = raw.rstrip("\n")
        if line.startswith("\t"):
            continue
        hit = _BLAME_HEADER.match(line)
        if hit:
            current = hit[1]
            start, count = int(hit[2]), int(hit[3])
            groups.append((current, start, start + count - 1))
        elif line == "boundary" and current is not None:
            boundary.add(current)
    return [BlamedLines(path, s, e, sha) for sha, s, e in groups if sha not in boundary]


def blame_at_head(repo: Path, rev_range: str, paths: Iterable[str]) -> list[BlamedLines]:
    """Which commit of `rev_range` last changed each line of `paths` at its end, by `git blame`.

    Exact where carrying hunks forward is not: a branch forked mid-release and merged at the end
    was numbered against its fork point, and blame follows the merge. One `git blame` a path,
    so the caller passes only the paths it needs (the files a failure's frames and its test
    exercise), never the whole range's; a path missing at the end gives nothing.
    """
    repo = Path(repo)
    start, end = split_range(rev_range)
    end_sha = resolve(repo, end)
    selection = end_sha if start is None else f"{resolve(repo, start)}..{end_sha}"
    paths = list(paths)
    found: list[BlamedLines] = []
    # A few blames cost less than writing the graph they would read (commit_graph's note).
    graph = graph_environment(repo, end_sha) if len(paths) >= _GRAPH_FROM else nullcontext({})
    with graph as graph_env:
        environment = {**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", **graph_env}
        for path in paths:
            command = ["git", "-C", str(repo), "blame", "--porcelain", "-M", selection, "--", path]
            done = subprocess.run(command, capture_output=True, env=environment, check=False)
            if done.returncode != 0:
                continue
            text = done.stdout.decode("utf-8", errors="replace")
            found += parse_blame_porcelain(path, text.splitlines())
    return found
