"""Benchmark `scale` (issue 39): the pages at a real team's size, on SQLite and PostgreSQL.

10,000 releases over 5 services, 100,000 runs, ~95,000 reports, 100,000 test cases
(`scale_data.py`; `--quick`: 300 releases, 3,000 cases, 3 rounds), loaded into a
database of the benchmark's own by a fresh process (`scale_child.py`), which then times the
release list (plain, each sort, a severity filter), home, the review desk, a release page with
1,000 test cases and the summary and verdict APIs (production settings, Django's test client,
the whole middleware stack). Target: p95 <= 100 ms for each page, the summary API <= 6
queries.

SQLite always (a file in the run's scratch directory). PostgreSQL when `DATABASE_URL` names
one: the benchmark makes a database of its own beside it (`<name>_bench`, dropped and
made again, dropped at the end), never the one named.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench.harness import Context, Result, Stats
from bench.procs import PROJECT_ROOT
from bench.site import SQLITE_FILE, STATIC_DIR, environment, template_dir

NAME = "scale"
TARGET_P95_MS = 100.0
SUMMARY_QUERIES = 6
API_KEY = "bench-scale-key-0123456789abcdef0123456789"
# Loading 10,000 releases into two databases outlasts the suite's 900 s on a busy machine.
DEADLINE_S = {"quick": 300.0, "full": 2_400.0}
# releases, test cases, rounds; --quick is a smoke run of the same code (bench --quick < 90 s)
SIZES = {"quick": (300, 3_000, 3), "full": (10_000, 100_000, 20)}


@contextmanager
def postgres_database(url: str) -> Iterator[str]:
    """A fresh database beside the one `url` names, for the length of the block."""
    import psycopg

    parts = urlsplit(url)
    name = f"{parts.path.lstrip('/') or 'postgres'}_bench"
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def measure(scratch: Path, database_url: str, quick: bool) -> dict[str, Any]:
    releases, cases, rounds = SIZES["quick" if quick else "full"]
    env = environment(scratch, DETECTIVE_API_TOKEN=API_KEY)
    env["DATABASE_URL"] = database_url  # empty: SQLite in the scratch directory
    # The run's migrated template (bench/site.py, shared with the other benchmarks): its
    # static files, and its SQLite database when that is the one measured.
    template = template_dir(scratch.parent)
    shutil.copytree(template / STATIC_DIR, scratch / STATIC_DIR, dirs_exist_ok=True)
    if database_url:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"],
            cwd=PROJECT_ROOT,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    else:
        for leftover in scratch.glob(f"{SQLITE_FILE}*"):
            leftover.unlink()
        shutil.copyfile(template / SQLITE_FILE, scratch / SQLITE_FILE)
    done = subprocess.run(
        [sys.executable, "-m", "bench.scale_child", *map(str, (releases, cases, rounds)), API_KEY],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"the scale benchmark's child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def rows_of(database: str, measured: dict[str, Any], quick: bool) -> list[Result]:
    rows = []
    for name, entry in measured["pages"].items():
        case = f"{name} ({database})"
        queries = max(entry["queries"]) if entry["queries"] else 0
        cpu = Stats.of(entry["cpu_ms"]) if entry.get("cpu_ms") else None
        cpu_note = f", CPU p50 {cpu.median:.0f} p95 {cpu.p95:.0f} ms" if cpu else ""
        note = f"{queries} queries{cpu_note}" + (
            "" if len(set(entry["queries"])) <= 1 else f" (varied: {sorted(set(entry['queries']))})"
        )
        if entry["status"] != 200 or not entry["ms"]:
            rows.append(
                Result(NAME, case, "server time", "ms", met=False, note=f"HTTP {entry['status']}")
            )
            continue
        stats = Stats.of(entry["ms"])
        met = stats.p95 <= TARGET_P95_MS
        target = f"p95 <= {TARGET_P95_MS:g} ms"
        if name == "summary API":
            met = met and queries <= SUMMARY_QUERIES
            target += f", <= {SUMMARY_QUERIES} queries"
        rows.append(
            Result(
                NAME,
                case,
                "server time",
                "ms",
                stats=stats,
                target=target,
                met=None if quick else met,
                note=note,
                extra={"queries": queries, "slowest": entry["slowest"]},
            )
        )
    counts = measured["counts"]
    rows[0].note += (
        f"; {counts['releases']:,} releases, {counts['runs']:,} runs, {counts['reports']:,} "
        f"reports, {counts['test_cases']:,} test cases, loaded in {measured['load_s']:.1f} s"
    )
    return rows


async def run(ctx: Context) -> list[Result]:
    scratch = ctx.scratch / NAME
    scratch.mkdir(parents=True, exist_ok=True)
    releases = SIZES["quick" if ctx.quick else "full"][0]
    ctx.say(f"{NAME}: SQLite, {releases:,} releases")
    measured = await asyncio.to_thread(measure, scratch, "", ctx.quick)
    rows = rows_of("SQLite", measured, ctx.quick)
    # Said now as well: on a busy machine PostgreSQL's load can outlast the part's deadline,
    # which drops the rows returned at the end (it did at load 20, 2026-11-29).
    _say_rows(ctx, rows)
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        ctx.say(f"{NAME}: PostgreSQL, {releases:,} releases")
        with postgres_database(url) as own:
            measured = await asyncio.to_thread(measure, scratch, own, ctx.quick)
        rows += rows_of("PostgreSQL", measured, ctx.quick)
    return rows


def _say_rows(ctx: Context, rows: list[Result]) -> None:
    for row in rows:
        if row.stats is not None:
            ctx.say(
                f"{NAME}: {row.case}: p50 {row.stats.median:.1f} p95 {row.stats.p95:.1f} ms; "
                f"{row.note}"
            )


if __name__ == "__main__":
    # `python -m bench.scale [quick]`: the figures and each page's slowest statements.
    import tempfile

    quick_arg = sys.argv[1:] == ["quick"]
    with tempfile.TemporaryDirectory(prefix="detective-scale-bench-") as folder:
        (Path(folder) / NAME).mkdir()
        target = os.environ.get("DATABASE_URL", "")
        if target.startswith("postgres"):
            with postgres_database(target) as own_url:
                figures = measure(Path(folder) / NAME, own_url, quick_arg)
        else:
            figures = measure(Path(folder) / NAME, "", quick_arg)
        print(json.dumps(figures["counts"]), f"loaded in {figures['load_s']:.1f} s")
        for page, entry in figures["pages"].items():
            stats = Stats.of(entry["ms"]) if entry["ms"] else None
            shown = f"p50 {stats.median:.1f} p95 {stats.p95:.1f}" if stats else "no figure"
            cpu = Stats.of(entry["cpu_ms"]) if entry.get("cpu_ms") else None
            shown += f" (CPU p50 {cpu.median:.1f} p95 {cpu.p95:.1f})" if cpu else ""
            print(f"{page}: HTTP {entry['status']} {shown} ms, {max(entry['queries'] or [0])} q")
            for seconds, sql in entry["slowest"]:
                print(f"    {seconds * 1000:.1f} ms {sql[:200]}")
