"""Benchmark: `manage.py backtest` over a generated git repository of 100 tags (issue 28: 100
tags of a real repository in under a minute).

The repository is made with `git fast-import` in the scratch folder: 100 releases of 10 commits
each, every commit changing three files, every 25th release a change under `src/payments/`,
tags `v1.<n>.0`. The command runs in a fresh process on a fresh SQLite database (migrated
first, outside the measure); the figure is its wall time from start to the printed totals,
Django's start included, as a user would wait for it.

Beside it (issue 39, item 3: the backtest within 2x the CPU of reading its ranges), the CPU
of the command (its own and its git children's, from `getrusage`) a release, against the
floor's: a process that reads the same ranges with the same `read_range` and does nothing
else. Each is also run on a repository of 2 tags (one release) and that run is taken off, so
Python's and Django's start cancel out: (CPU at N tags - CPU at 2 tags) / (N - 2).
"""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.git_range import _blob
from bench.harness import Context, Result, Skip
from bench.site import migrated_copy

NAME = "backtest"
TAGS = 100
QUICK_TAGS = 20
COMMITS_PER_RELEASE = 10
TARGET_S = 60.0
TARGET_RATIO = 2.0
ROOT = Path(__file__).resolve().parents[1]


def fast_import_stream(tags: int) -> bytes:
    parts: list[bytes] = []
    number = 0
    for release in range(tags):
        for _ in range(COMMITS_PER_RELEASE if release else 1):
            number += 1
            when = 1_700_000_000 + number * 600
            parts.append(b"commit refs/heads/main\nmark :%d\n" % number)
            parts.append(b"author Bench <bench@example.com> %d +0000\n" % when)
            parts.append(b"committer Bench <bench@example.com> %d +0000\n" % when)
            parts.append(_blob(f"Change {number} of release {release}".encode()))
            for offset in range(3):
                folder = "payments" if release % 25 == 0 and offset == 0 else "app"
                path = f"src/{folder}/module_{(number + offset) % 40}.py"
                body = "".join(f"value_{number}_{line} = {line}\n" for line in range(8))
                parts.append(b"M 644 inline %s\n" % path.encode() + _blob(body.encode()))
            parts.append(b"\n")
        parts.append(b"reset refs/tags/v1.%d.0\nfrom :%d\n\n" % (release, number))
    return b"".join(parts)


def make_repository(root: Path, tags: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(
        ["git", "-C", str(root), "fast-import", "--quiet"],
        input=fast_import_stream(tags),
        check=True,
    )
    return root


# The floor: every range of consecutive tags read, as the backtest reads them, nothing else.
FLOOR = """
import subprocess, sys
from pathlib import Path
from detective_client import git
repo = Path(sys.argv[1])
tags = subprocess.run(["git", "-C", str(repo), "tag", "-l", "v*", "--sort=version:refname"],
                      capture_output=True, text=True, check=True).stdout.split()
print(sum(len(git.read_range(repo, f"{a}..{b}")) for a, b in zip(tags, tags[1:])))
"""


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def floor_cpu(repo: Path) -> float:
    """CPU of reading the ranges in a fresh process, git's included."""
    before = _children_cpu()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-c", FLOOR, str(repo)], cwd=ROOT, env=env, check=True, capture_output=True
    )
    return _children_cpu() - before


def backtest(
    repo: Path, scratch: Path, template_root: Path | None = None
) -> tuple[float, str, float]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "detective_site.settings",
        "DETECTIVE_DATA_DIR": str(scratch),
    }
    env.pop("DATABASE_URL", None)
    manage = [sys.executable, "manage.py"]
    migrated_copy(scratch, template_root or scratch.parent)
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(
        [*manage, "backtest", "--service", "bench", "--git-repo", str(repo), "--tags", "v*"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    seconds, cpu = time.perf_counter() - started, _children_cpu() - cpu
    totals = next((line for line in done.stdout.splitlines() if " releases of bench " in line), "?")
    return seconds, totals, cpu


async def run(ctx: Context) -> list[Result]:
    tags = QUICK_TAGS if ctx.quick else TAGS
    try:
        subprocess.run(["git", "--version"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        raise Skip("the git command is not installed") from None
    scratch = ctx.scratch / "backtest"
    ctx.say(f"making a repository of {tags} tags with git fast-import")
    repo = await asyncio.to_thread(make_repository, scratch / "repo", tags)
    seconds, totals, cpu = await asyncio.to_thread(backtest, repo, scratch, ctx.scratch)
    ctx.say(totals)
    wall = Result(
        NAME,
        f"backtest, {tags} tags",
        "sources",
        "s",
        value=round(seconds, 2),
        target=f"<= {TARGET_S:g} s (100 tags)",
        met=seconds <= TARGET_S if tags >= TAGS else None,
        note=f"wall time of the command, Django's start included; {totals}",
    )
    if ctx.quick:
        # The CPU comparison needs a second migrated database and two more processes, and
        # at 20 tags the starts it takes off are most of what it measures: not in --quick.
        return [wall]
    one = await asyncio.to_thread(make_repository, scratch / "one", 2)
    (scratch / "one-db").mkdir(exist_ok=True)
    _, _, cpu_one = await asyncio.to_thread(backtest, one, scratch / "one-db", ctx.scratch)
    floor = await asyncio.to_thread(floor_cpu, repo)
    floor_one = await asyncio.to_thread(floor_cpu, one)
    per_release = (cpu - cpu_one) / (tags - 2)
    floor_per_release = (floor - floor_one) / (tags - 2)
    ratio = per_release / floor_per_release
    return [
        Result(
            NAME,
            f"backtest, {tags} tags: CPU a release",
            "sources",
            "ms",
            value=round(per_release * 1000, 1),
            ratio=round(ratio, 2),
            target=f"<= {TARGET_RATIO:g} x reading the ranges",
            met=ratio <= TARGET_RATIO,
            note=f"(CPU at {tags} tags - at 2) / {tags - 2}, git's included; the command "
            f"{cpu:.2f} s, reading the ranges {floor:.2f} s",
        ),
        Result(
            NAME,
            f"backtest, {tags} tags: CPU a release",
            "floor (reading the ranges)",
            "ms",
            value=round(floor_per_release * 1000, 1),
            ratio=1.0,
            note="git.read_range of each pair of tags in a fresh process, nothing else",
        ),
        wall,
    ]


if __name__ == "__main__":
    import tempfile

    count = int(sys.argv[1]) if len(sys.argv) > 1 else TAGS
    with tempfile.TemporaryDirectory(prefix="detective-backtest-bench-") as folder:
        made = make_repository(Path(folder) / "repo", count)
        print(backtest(made, Path(folder)), floor_cpu(made))
