"""Benchmark: the client's git reader (`detective_client.git.read_range`) on a range of 5,000
commits (issue #19: within 5 s).

The repository is made with `git fast-import` in the scratch folder: each commit changes three
text files of a few hundred, every 50th renames a file and every 100th adds a binary file, so the
reader does what it does on a real range (numstat, rename detection, binary entries). The wall
time of `read_range` is measured three times; the median is the figure.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import time
from pathlib import Path

from bench.harness import Context, Result, Skip
from detective_client.git import read_range

NAME = "git"
COMMITS = 5_000
QUICK_COMMITS = 1_000
TARGET_S = 5.0
RUNS = 3


def _blob(text: bytes) -> bytes:
    return b"data %d\n%s\n" % (len(text), text)


def fast_import_stream(commits: int) -> bytes:
    """A `git fast-import` stream of `commits` commits on main, tagged v0 at the first and
    v1 at the last."""
    parts: list[bytes] = []
    names = [f"src/module_{n}.py" for n in range(300)]
    for number in range(1, commits + 1):
        when = 1_700_000_000 + number * 60
        parts.append(b"commit refs/heads/main\nmark :%d\n" % number)
        parts.append(b"author Bench <bench@example.com> %d +0000\n" % when)
        parts.append(b"committer Bench <bench@example.com> %d +0000\n" % when)
        parts.append(_blob(f"feat(m{number % 7}): change {number}".encode()))
        for offset in range(3):
            path = names[(number * 3 + offset) % len(names)]
            body = "".join(f"value_{number}_{line} = {line}\n" for line in range(12))
            parts.append(b"M 644 inline %s\n" % path.encode() + _blob(body.encode()))
        if number % 50 == 0:
            old = names[number % len(names)]
            new = f"src/renamed_{number}.py"
            parts.append(b"R %s %s\n" % (old.encode(), new.encode()))
            names[number % len(names)] = new
        if number % 100 == 0:
            parts.append(b"M 644 inline assets/blob_%d.bin\n" % number + _blob(bytes(range(256))))
        parts.append(b"\n")
        if number == 1:
            parts.append(b"reset refs/tags/v0\nfrom :1\n\n")
    parts.append(b"reset refs/tags/v1\nfrom :%d\n\n" % commits)
    return b"".join(parts)


def make_repository(root: Path, commits: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(
        ["git", "-C", str(root), "fast-import", "--quiet"],
        input=fast_import_stream(commits),
        check=True,
    )
    return root


def measure(repo: Path, rev_range: str, runs: int = RUNS) -> tuple[list[float], int]:
    times: list[float] = []
    count = 0
    for _ in range(runs):
        started = time.perf_counter()
        count = len(read_range(repo, rev_range))
        times.append(time.perf_counter() - started)
    return times, count


async def run(ctx: Context) -> list[Result]:
    commits = QUICK_COMMITS if ctx.quick else COMMITS
    try:
        subprocess.run(["git", "--version"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        raise Skip("the git command is not installed") from None
    ctx.say(f"making a repository of {commits} commits with git fast-import")
    # v0..v1 holds every commit but the first: one more makes the range `commits` long.
    repo = await asyncio.to_thread(make_repository, ctx.scratch / "git-range", commits + 1)
    times, count = await asyncio.to_thread(measure, repo, "v0..v1")
    median = statistics.median(times)
    ctx.say(f"read {count} commits: {', '.join(f'{t:.2f} s' for t in times)}")
    return [
        Result(
            NAME,
            f"read_range, {count} commits",
            "detective_client",
            "s",
            value=round(median, 3),
            target=f"<= {TARGET_S:g} s (5,000 commits)",
            met=median <= TARGET_S if count >= COMMITS else None,
            note=f"median of {RUNS}; {commits_per_second(count, median):,.0f} commits/s",
        )
    ]


def commits_per_second(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


if __name__ == "__main__":
    import sys
    import tempfile

    size = int(sys.argv[1]) if len(sys.argv) > 1 else COMMITS
    with tempfile.TemporaryDirectory(prefix="detective-git-bench-") as scratch:
        made = make_repository(Path(scratch) / "repo", size + 1)
        seconds, read = measure(made, "v0..v1")
        print(f"read_range: {read} commits, median {statistics.median(seconds):.3f} s of {seconds}")
