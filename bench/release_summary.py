"""Benchmark: the release summary the agent reads (`GET /api/releases/<v>/summary`), built by
`sources.judging.judge_release(release).for_agent()`: its SQL queries and its time on the
demo data (issue #29: documented at <= 6 queries and <= 10 ms; it was 13-18 queries).

A fresh process migrates a fresh SQLite database (production settings), seeds the demo data
(`manage.py seed_demo`: 16 releases of two services, from git, JUnit and OpenMetrics files),
then judges every demo release round by round (two warm-up rounds thrown away), each inside
`CaptureQueriesContext`. The time is the call's own, without HTTP or the middleware (the
detail benchmark times the endpoint through Django's test client).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.harness import Context, Result, Stats
from bench.junit_ingest import ROOT
from bench.site import environment, migrated_copy

NAME = "summary"
# The policy, the earlier releases, the history's three (the tests, the commits, the samples)
# and the release's error groups from its traces (issue 36: `traces.history`, through
# sources/judging_hooks.py). The API reads the policy with the release (issue 39): 6 in all.
MAX_QUERIES = 6
TARGET_MS = 10.0

CHILD = """
import json, sys, time
import django
django.setup()
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from sources import judging
from releases.models import Release

rounds = int(sys.argv[1])
call_command("seed_demo", verbosity=0)
ids = list(Release.objects.order_by("id").values_list("id", flat=True))
ms, cpu, queries, versions = [], [], [], []
for index in range(rounds + 2):
    for pk in ids[index % len(ids):] + ids[:index % len(ids)]:
        release = Release.objects.select_related("service").get(pk=pk)
        with CaptureQueriesContext(connection) as captured:
            begin, begin_cpu = time.perf_counter(), time.process_time()
            judging.judge_release(release).for_agent()
            elapsed = (time.perf_counter() - begin) * 1000
            used = (time.process_time() - begin_cpu) * 1000
        if index >= 2:
            ms.append(elapsed)
            cpu.append(used)
            queries.append(len(captured))
            versions.append(release.version)
print(json.dumps({"ms": ms, "cpu_ms": cpu, "queries": queries, "releases": sorted(set(versions))}))
"""


def measure(scratch: Path, rounds: int) -> dict[str, Any]:
    env = environment(scratch)
    env.pop("DATABASE_URL", None)
    migrated_copy(scratch, scratch.parent)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(rounds)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"the summary timing failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def rows(measured: dict[str, Any]) -> list[Result]:
    stats = Stats.of(measured["ms"])
    cpu = Stats.of(measured.get("cpu_ms") or measured["ms"])
    most = max(measured["queries"])
    releases = len(measured["releases"])
    case = f"judge_release().for_agent(), {releases} demo releases"
    return [
        Result(
            NAME,
            case,
            "time",
            "ms",
            stats=stats,
            target=f"median <= {TARGET_MS:g} ms",
            met=stats.median <= TARGET_MS,
            note=f"p95 {stats.p95:.3g} ms",
        ),
        # The process's CPU time: what the wall time would be on an idle machine (on the 2
        # shared cores the wall time moves with everyone else's load).
        Result(
            NAME,
            case,
            "CPU time",
            "ms",
            stats=cpu,
            target=f"median <= {TARGET_MS:g} ms",
            met=cpu.median <= TARGET_MS,
        ),
        Result(
            NAME,
            case,
            "SQL queries (most of any release)",
            "queries",
            value=float(most),
            target=f"<= {MAX_QUERIES} queries",
            met=most <= MAX_QUERIES,
            note=f"fewest {min(measured['queries'])}",
        ),
    ]


async def run(ctx: Context) -> list[Result]:
    rounds = 3 if ctx.quick else 30
    scratch = ctx.scratch / "summary"
    scratch.mkdir(parents=True, exist_ok=True)
    ctx.say(f"{NAME}: the demo releases' summaries, {rounds} rounds")
    return rows(await asyncio.to_thread(measure, scratch, rounds))


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="detective-summary-bench-") as folder:
        for row in rows(measure(Path(folder), int(sys.argv[1]) if len(sys.argv) > 1 else 30)):
            print(row.case, row.contestant, row.stats or row.value, row.target, row.met)
