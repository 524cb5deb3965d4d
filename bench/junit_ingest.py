"""Benchmark: one JUnit XML report of 100,000 test cases (about 50 MB) ingested (issue #19:
within 10 s, the process's peak memory within 200 MB).

The report is written here in Surefire's shape (a suite per class, a failure with its stack
trace every 200th case, a flaky rerun every 500th, output on every case), then ingested by a
fresh process on a fresh SQLite database (migrated first, outside the measure) through
`sources.services.ingest_junit`: parsed by defusedxml as a stream, stored in batches in one
transaction, the summary derived. That process prints the ingestion's wall time and its own
peak resident memory (VmHWM from /proc, Django and all included).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from bench.harness import Context, Result
from bench.site import migrated_copy

NAME = "junit"
CASES = 100_000
QUICK_CASES = 10_000
TARGET_S = 10.0
TARGET_MB = 200.0
PER_SUITE = 250
ROOT = Path(__file__).resolve().parents[1]

OUTPUT = "starting step {n} of the scenario; fixtures loaded from tests/fixtures/orders.json\n" * 4


def write_report(path: Path, cases: int) -> int:
    """The report; its size in bytes."""
    with path.open("w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="bench">\n')
        for number in range(cases):
            klass = f"com.example.shop.module{number // PER_SUITE}.OrderServiceTest"
            if number % PER_SUITE == 0:
                if number:
                    out.write("  </testsuite>\n")
                out.write(f'  <testsuite name="{klass}" tests="{PER_SUITE}" time="12.5">\n')
            out.write(
                f'    <testcase name="placesOrderWithDiscount{number}" classname="{klass}" '
                f'time="0.{number % 997:03d}">\n'
            )
            if number % 200 == 0:
                out.write(
                    '      <failure message="expected: &lt;90&gt; but was: &lt;80&gt;" '
                    'type="org.opentest4j.AssertionFailedError">'
                    + "at com.example.shop.OrderServiceTest.placesOrder(OrderServiceTest.java:58)\n"
                    * 8
                    + "</failure>\n"
                )
            elif number % 500 == 1:
                out.write(
                    '      <flakyFailure message="Read timed out" '
                    'type="java.net.SocketTimeoutException"><stackTrace>at x</stackTrace>'
                    "</flakyFailure>\n"
                )
            out.write(f"      <system-out><![CDATA[{OUTPUT.format(n=number)}]]></system-out>\n")
            out.write("    </testcase>\n")
        out.write("  </testsuite>\n</testsuites>\n")
    return path.stat().st_size


# Run in a fresh process: ingest the report, print the figures as JSON.
CHILD = """
import json, os, sys, time
import django
django.setup()
from sources import services
from sources.services import Origin, ReleaseFields
release, _ = services.upsert_release(ReleaseFields(version="v-bench"), Origin("bench"))
started, cpu = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as stream:
    result = services.ingest_junit(release, stream, "bench.xml", Origin("bench"))
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
release.refresh_from_db()
status = open("/proc/self/status").read()
peak_kb = int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1])
figures = {"seconds": seconds, "cpu_seconds": cpu, "peak_mb": peak_kb / 1024}
print(json.dumps({**figures, "counts": result.counts, "failed": release.test_results["failed"]}))
"""


def ingest(report: Path, scratch: Path) -> dict[str, object]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "detective_site.settings",
        "DETECTIVE_DATA_DIR": str(scratch),
    }
    env.pop("DATABASE_URL", None)
    migrated_copy(scratch, scratch.parent)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(report)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


async def run(ctx: Context) -> list[Result]:
    cases = QUICK_CASES if ctx.quick else CASES
    scratch = ctx.scratch / "junit"
    scratch.mkdir(parents=True, exist_ok=True)
    report = scratch / "bench.xml"
    size = await asyncio.to_thread(write_report, report, cases)
    ctx.say(f"ingesting a JUnit XML report of {cases:,} cases ({size / 1e6:.1f} MB)")
    figures = await asyncio.to_thread(ingest, report, scratch)
    seconds, peak = float(figures["seconds"]), float(figures["peak_mb"])  # type: ignore[arg-type]
    full = cases >= CASES
    note = (
        f"{size / 1e6:.1f} MB; CPU {float(figures['cpu_seconds']):.1f} s "  # type: ignore[arg-type]
        f"(the wall time waits for a shared machine); {figures['counts']}"
    )
    return [
        Result(
            NAME,
            f"ingest_junit, {cases:,} cases",
            "sources",
            "s",
            value=round(seconds, 2),
            target=f"<= {TARGET_S:g} s (100,000 cases)",
            met=seconds <= TARGET_S if full else None,
            note=note,
        ),
        Result(
            NAME,
            f"ingest_junit, {cases:,} cases: peak memory",
            "sources",
            "MiB",
            value=round(peak, 1),
            target=f"<= {TARGET_MB:g} MB",
            met=peak <= TARGET_MB if full else None,
            note="VmHWM of the ingesting process",
        ),
    ]


if __name__ == "__main__":
    import tempfile

    size_arg = int(sys.argv[1]) if len(sys.argv) > 1 else CASES
    with tempfile.TemporaryDirectory(prefix="detective-junit-bench-") as folder:
        made = Path(folder) / "bench.xml"
        print(f"{write_report(made, size_arg) / 1e6:.1f} MB")
        print(ingest(made, Path(folder)))
