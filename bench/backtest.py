"""Benchmark: `manage.py backtest` over a generated git repository of 100 tags (issue 28: 100
tags of a real repository in under a minute).

The repository is made with `git fast-import` in the scratch folder: 100 releases of 10 commits
each, every commit changing three files, every 25th release a change under `src/payments/`,
tags `v1.<n>.0`. The command runs in a fresh process on a fresh SQLite database (migrated
first, outside the measure); the figure is its wall time from start to the printed totals,
Django's start included, as a user would wait for it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.git_range import _blob
from bench.harness import Context, Result, Skip

NAME = "backtest"
TAGS = 100
QUICK_TAGS = 20
COMMITS_PER_RELEASE = 10
TARGET_S = 60.0
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


def backtest(repo: Path, scratch: Path) -> tuple[float, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "detective_site.settings",
        "DETECTIVE_DATA_DIR": str(scratch),
    }
    env.pop("DATABASE_URL", None)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    started = time.perf_counter()
    done = subprocess.run(
        [*manage, "backtest", "--service", "bench", "--git-repo", str(repo), "--tags", "v*"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    totals = next((line for line in done.stdout.splitlines() if " releases of bench " in line), "?")
    return seconds, totals


async def run(ctx: Context) -> list[Result]:
    tags = QUICK_TAGS if ctx.quick else TAGS
    try:
        subprocess.run(["git", "--version"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        raise Skip("the git command is not installed") from None
    scratch = ctx.scratch / "backtest"
    ctx.say(f"making a repository of {tags} tags with git fast-import")
    repo = await asyncio.to_thread(make_repository, scratch / "repo", tags)
    seconds, totals = await asyncio.to_thread(backtest, repo, scratch)
    ctx.say(totals)
    return [
        Result(
            NAME,
            f"backtest, {tags} tags",
            "sources",
            "s",
            value=round(seconds, 2),
            target=f"<= {TARGET_S:g} s (100 tags)",
            met=seconds <= TARGET_S if tags >= TAGS else None,
            note=f"wall time of the command, Django's start included; {totals}",
        )
    ]


if __name__ == "__main__":
    import tempfile

    count = int(sys.argv[1]) if len(sys.argv) > 1 else TAGS
    with tempfile.TemporaryDirectory(prefix="detective-backtest-bench-") as folder:
        made = make_repository(Path(folder) / "repo", count)
        print(backtest(made, Path(folder)))
