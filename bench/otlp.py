"""Benchmark: OTLP traces in (issue 36; goal: 20,000 spans/s a core, memory flat in the span
count). Two figures, each measured in a fresh process (bench/otlp_child.py) over the same
bodies of 512 spans:

- the parse floor: decoding, checking and folding the spans in plain Python, no database;
  its peak memory over 1,024,000 spans (20,480 with --quick) says whether memory is flat;
- through the view into the database: `POST /otlp/v1/traces` by Django's test client
  (authentication, reading, the merge per release) on a fresh SQLite database, what `up`
  runs on by default. Spans per second of CPU time is the figure per core; the wall time
  waits for a shared machine too.
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

NAME = "otlp"
# --quick: 40 requests of 512 spans, enough for a rate (45 s of CPU at 51,200 at load 13).
SPANS = {"quick": 20_480, "full": 1_024_000}
TARGET_SPANS_S = 20_000
ROOT = Path(__file__).resolve().parents[1]
DEADLINE_S = {"quick": 240.0, "full": 900.0}


def measure(mode: str, spans: int, scratch: Path) -> dict[str, float]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "detective_site.settings",
        "DETECTIVE_DATA_DIR": str(scratch),
    }
    env.pop("DATABASE_URL", None)
    if mode == "view":
        migrated_copy(scratch, scratch.parent)
    done = subprocess.run(
        [sys.executable, "-m", "bench.otlp_child", mode, str(spans)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


async def run(ctx: Context) -> list[Result]:
    spans = SPANS["quick" if ctx.quick else "full"]
    rows = []
    for mode, case in (("parse", "read and folded, no database"), ("view", "POST into SQLite")):
        scratch = ctx.scratch / f"otlp-{mode}"
        scratch.mkdir(parents=True, exist_ok=True)
        ctx.say(f"OTLP: {spans:,} spans {case}")
        figures = await asyncio.to_thread(measure, mode, spans, scratch)
        per_cpu = figures["spans"] / figures["cpu_seconds"]
        note = (
            f"{figures['spans']:,} spans in {figures['bytes'] / 1e6:.0f} MB of protobuf; "
            f"wall {figures['spans'] / figures['seconds']:,.0f} spans/s"
        )
        if mode == "view":
            note += (
                f"; kept {figures['route_minutes']:,} route minutes, "
                f"{figures['requests']:,} requests, {figures['errors']:,} errors, "
                f"{figures['groups']} groups"
            )
        rows.append(
            Result(
                NAME,
                f"{case}, spans/s a core",
                "traces",
                "spans/s",
                value=round(per_cpu),
                target=f">= {TARGET_SPANS_S:,} spans/s a core",
                met=per_cpu >= TARGET_SPANS_S,
                note=note,
            )
        )
        rows.append(
            Result(
                NAME,
                f"{case}: peak memory",
                "traces",
                "MiB",
                value=round(figures["peak_mb"], 1),
                note=f"VmHWM of the process, Django included, over {figures['spans']:,} spans",
            )
        )
    return rows
