"""Benchmark: a release with 100,000 test cases (issue #19): its page, its test list paged and
filtered, and its summary as the agent reads it, within the page target (p95 <= 100 ms).

The release gets the JUnit benchmark's report (`junit_ingest.write_report`: 100,000 cases in
Surefire's shape, a failure every 200th, a flaky rerun every 500th; 10,000 with `--quick`),
ingested into a fresh SQLite database by a fresh process, which then times the pages through
Django's test client (production settings, the whole middleware stack, no network) as a
logged-in superuser, the
pages interleaved round by round, and counts each one's SQL queries.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.harness import Context, Result, Stats
from bench.junit_ingest import CASES, QUICK_CASES, ROOT, write_report
from bench.site import environment, migrated_copy

NAME = "detail"
TARGET_P95_MS = 100.0
API_KEY = "bench-api-key-0123456789abcdef0123456789"

PAGES = {
    "release page (failed tests)": "/releases/v-bench/",
    "release page, htmx: passed tests, page 1,000": (
        "/releases/v-bench/?tab=tests&status=passed&page=1000"
    ),
    "test list: all, page 1,500": "/releases/v-bench/?tab=tests&status=all&page=1500",
    "test list: name search": "/releases/v-bench/?tab=tests&status=all&q=Discount9999",
    "summary (GET /api/releases/v-bench/summary)": "/api/releases/v-bench/summary",
}
HTMX = {"release page, htmx: passed tests, page 1,000"}

# Run in a fresh process: ingest the report, then time the pages; print the figures as JSON.
CHILD = """
import json, sys, time
import django
django.setup()
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from sources import services
from sources.services import Origin, ReleaseFields

report, rounds, key = sys.argv[1], int(sys.argv[2]), sys.argv[5]
pages, htmx = json.loads(sys.argv[3]), set(json.loads(sys.argv[4]))
release, _ = services.upsert_release(ReleaseFields(version="v-bench"), Origin("bench"))
with open(report, "rb") as stream:
    services.ingest_junit(release, stream, "bench.xml", Origin("bench"))
user = get_user_model().objects.create_superuser("bench", "bench@example.com", "bench-password")
client = Client(HTTP_HOST="127.0.0.1")
client.force_login(user)
entry_of = lambda: {"ms": [], "queries": [], "status": None, "bytes": 0, "slowest": []}
results = {name: entry_of() for name in pages}
names = list(pages)
for index in range(rounds + 2):
    shift = index % len(names)
    for name in names[shift:] + names[:shift]:
        headers = {"Authorization": f"Bearer {key}"} if "/api/" in pages[name] else {}
        if name in htmx:
            headers |= {"HX-Request": "true", "HX-Target": "release-sections"}
        with CaptureQueriesContext(connection) as queries:
            begin = time.perf_counter()
            response = client.get(pages[name], secure=True, headers=headers)
            elapsed = (time.perf_counter() - begin) * 1000
        entry = results[name]
        entry["status"], entry["bytes"] = response.status_code, len(response.content)
        if index >= 2:
            entry["ms"].append(elapsed)
            entry["queries"].append(len(queries))
            slowest = sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[:3]
            entry["slowest"] = [(float(q["time"]), q["sql"][:300]) for q in slowest]
print(json.dumps({"pages": results, "cases": release.test_cases.count()}))
"""


def measure(report: Path, scratch: Path, rounds: int) -> dict[str, Any]:
    # Production settings (DEBUG off: cached templates), as the pages benchmark's site.
    env = environment(scratch, DETECTIVE_API_TOKEN=API_KEY)
    env.pop("DATABASE_URL", None)
    migrated_copy(scratch, scratch.parent, static=True)
    args = [str(report), str(rounds), json.dumps(PAGES), json.dumps(sorted(HTMX)), API_KEY]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"the page timing failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


async def run(ctx: Context) -> list[Result]:
    cases = QUICK_CASES if ctx.quick else CASES
    rounds = 8 if ctx.quick else 30
    scratch = ctx.scratch / "detail"
    scratch.mkdir(parents=True, exist_ok=True)
    report = scratch / "bench.xml"
    await asyncio.to_thread(write_report, report, cases)
    ctx.say(f"{NAME}: a release of {cases:,} test cases, {len(PAGES)} pages, {rounds} rounds")
    measured = await asyncio.to_thread(measure, report, scratch, rounds)
    rows = []
    for name, entry in measured["pages"].items():
        target = f"p95 <= {TARGET_P95_MS:g} ms"
        if entry["status"] != 200 or not entry["ms"]:
            rows.append(
                Result(
                    NAME,
                    name,
                    "server time",
                    "ms",
                    target=target,
                    met=False,
                    note=f"HTTP {entry['status']}: not measured",
                )
            )
            continue
        stats = Stats.of(entry["ms"])
        rows.append(
            Result(
                NAME,
                name,
                "server time",
                "ms",
                stats=stats,
                target=target,
                met=stats.p95 <= TARGET_P95_MS if cases >= CASES else None,
                note=f"{max(entry['queries'])} SQL queries, {entry['bytes']:,} bytes",
            )
        )
    rows[0].note += f"; {measured['cases']:,} test cases on the release"
    return rows


if __name__ == "__main__":
    import tempfile

    size_arg = int(sys.argv[1]) if len(sys.argv) > 1 else CASES
    with tempfile.TemporaryDirectory(prefix="detective-detail-bench-") as folder:
        made = Path(folder) / "bench.xml"
        write_report(made, size_arg)
        for page, figures in measure(made, Path(folder), 10)["pages"].items():
            print(page, figures["status"], Stats.of(figures["ms"]), max(figures["queries"]))
            for seconds, sql in figures["slowest"]:
                print(f"  {seconds * 1000:.1f} ms {sql}")
