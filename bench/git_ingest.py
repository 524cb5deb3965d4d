"""Benchmark: `manage.py ingest --git-repo` against reading its range (issue 39, item 3: within
3x the CPU of `detective_client.git.read_range` on the same range).

Both run in fresh processes and are measured by CPU time (their own and their git children's,
`getrusage`), which the shared machine's load moves far less than the wall time:
- *ingest*: `manage.py ingest VERSION --git-repo R --git-range A..B` on a fresh SQLite database
  (migrated first, outside the measure): the range read, its hunks, the head's facts (imports,
  blame, functions), the rows stored, the release's summary;
- *floor*: a process that calls `read_range` on the same range and nothing else.
Each is also run on the range's last commit alone (`B~1..B`; twice, the lesser counts) and
that run is taken off, so Python's and Django's start cancel out.

The repository is the `git` benchmark's (`bench/git_range.py`: 5,000 commits of three files each
among 300, renames and binaries; 1,000 in `--quick`). `DETECTIVE_BENCH_GIT_REPO` (a checkout)
and `DETECTIVE_BENCH_GIT_RANGE` (`A..B`) measure a real repository instead, e.g. pallets/click.
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

from bench.git_range import make_repository
from bench.harness import Context, Result, Skip

NAME = "ingest"
COMMITS = 5_000
QUICK_COMMITS = 1_000
TARGET_RATIO = 3.0
ROOT = Path(__file__).resolve().parents[1]

FLOOR = """
import sys
from pathlib import Path
from detective_client import git
print(len(git.read_range(Path(sys.argv[1]), sys.argv[2])))
"""


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def floor_cpu(repo: Path, rev_range: str) -> float:
    """CPU of reading the range in a fresh process, git's included."""
    before = _children_cpu()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-c", FLOOR, str(repo), rev_range],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return _children_cpu() - before


def migrated(scratch: Path) -> dict[str, str]:
    """The environment of a fresh migrated SQLite database in `scratch`."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "detective_site.settings",
        "DETECTIVE_DATA_DIR": str(scratch),
    }
    env.pop("DATABASE_URL", None)
    scratch.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return env


def ingest_cpu(repo: Path, rev_range: str, env: dict[str, str], version: str) -> float:
    before = _children_cpu()
    subprocess.run(
        [
            *(sys.executable, "manage.py", "ingest", version, "--service", "bench"),
            *("--git-repo", str(repo), "--git-range", rev_range),
        ],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return _children_cpu() - before


def measure(repo: Path, rev_range: str, scratch: Path) -> dict[str, float]:
    """CPU seconds of the ingestion and of the floor, each less its one-commit run."""
    end = rev_range.partition("..")[2] or rev_range
    one = f"{end}~1..{end}"
    env = migrated(scratch / "db")
    # The start is most of a one-commit run and moves with the load (with
    # PYTHONDONTWRITEBYTECODE every import is compiled again): the least of two is taken off.
    small = min(ingest_cpu(repo, one, env, f"v-one-{n}") for n in range(2))
    whole = ingest_cpu(repo, rev_range, env, "v-range")
    floor_small = min(floor_cpu(repo, one) for _ in range(2))
    floor = floor_cpu(repo, rev_range)
    shutil.rmtree(scratch / "db", ignore_errors=True)
    return {
        "ingest": whole - small,
        "floor": floor - floor_small,
        "ingest_total": whole,
        "floor_total": floor,
    }


def _count(repo: Path, rev_range: str) -> int:
    done = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--count", rev_range],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.strip())


async def run(ctx: Context) -> list[Result]:
    try:
        subprocess.run(["git", "--version"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        raise Skip("the git command is not installed") from None
    given = os.environ.get("DETECTIVE_BENCH_GIT_REPO")
    if given:
        repo = Path(given)
        rev_range = os.environ.get("DETECTIVE_BENCH_GIT_RANGE", "HEAD")
        where = f"{repo.name} {rev_range}"
    else:
        commits = QUICK_COMMITS if ctx.quick else COMMITS
        ctx.say(f"making a repository of {commits} commits with git fast-import")
        repo = await asyncio.to_thread(
            make_repository, ctx.scratch / "git-ingest" / "repo", commits + 1
        )
        rev_range = "v0..v1"
        where = "generated"
    count = await asyncio.to_thread(_count, repo, rev_range)
    figures = await asyncio.to_thread(measure, repo, rev_range, ctx.scratch / "git-ingest")
    ratio = figures["ingest"] / figures["floor"]
    case = f"ingest --git-repo, {count:,} commits ({where}): CPU"
    ctx.say(f"{case}: ingest {figures['ingest']:.2f} s, reading {figures['floor']:.2f} s")
    return [
        Result(
            NAME,
            case,
            "manage.py ingest --git-repo",
            "s",
            value=round(figures["ingest"], 2),
            ratio=round(ratio, 2),
            target=f"<= {TARGET_RATIO:g} x reading the range",
            met=ratio <= TARGET_RATIO,
            note=f"its CPU and git's, less a one-commit run (the whole command "
            f"{figures['ingest_total']:.2f} s)",
        ),
        Result(
            NAME,
            case,
            "floor (read_range)",
            "s",
            value=round(figures["floor"], 2),
            ratio=1.0,
            note=f"read_range in a fresh process, less a one-commit run (whole "
            f"{figures['floor_total']:.2f} s)",
        ),
    ]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="detective-ingest-bench-") as folder:
        if len(sys.argv) > 2:
            target, chosen = Path(sys.argv[1]), sys.argv[2]
        else:
            target = make_repository(Path(folder) / "repo", COMMITS + 1)
            chosen = "v0..v1"
        print(measure(target, chosen, Path(folder)))
