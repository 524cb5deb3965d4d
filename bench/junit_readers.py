"""Benchmark: the JUnit readers side by side on one generated report (issue 31, item 4): the
project's parser (`sources.parsers.junit.parse`, every record made), defusedxml's `iterparse`
(the safe tree builder the parser used before) and the plain `ElementTree.iterparse` with
`clear()` (the floor: no guard, no record). Targets: the parser within 1.5 x the floor's CPU,
its peak memory not growing with the number of test cases beyond what the stored rows need.

Each reader runs in a fresh process (imports done before the clock starts): CPU time is the
best of three reads (`time.process_time`), peak memory the traced peak of one read
(`tracemalloc`: Python's allocations, expat's own buffers aside). Outside `--quick`, valgrind's
callgrind counts instructions (the same however busy the machine is): the run on the report less
the run on a one-case report, so the interpreter's start and imports cancel out.

    uv run python -m bench.junit_readers parser|defusedxml|floor REPORT [--memory]
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from bench import callgrind
from bench.harness import Context, Result
from bench.junit_ingest import ROOT
from bench.junit_shapes import write_mixed_report as write_report

NAME = "junit-readers"
CASES = 100_000
QUICK_CASES = 10_000
CALLGRIND_CASES = 10_000
TARGET_RATIO = 1.5
READERS = ("floor", "defusedxml", "parser")
# The shared corpus's real reports (jest-junit, Surefire, TestNG, PHPUnit, pytest, unittest,
# Swift, Nette: 18 files, 0.8 MB), beside the clone or beside the folder of worktrees.
_CORPORA = [folder / "shared" / "corpus" / "junit" / "files" for folder in ROOT.parents[:2]]
CORPUS = next((p for p in _CORPORA if p.is_dir() and any(p.glob("*.xml"))), None)
CORPUS_ROUNDS = 20


def _read(reader: str, path: Path) -> int:
    if path.is_dir():
        return sum(_read(reader, report) for report in sorted(path.glob("*.xml")))
    if reader == "parser":
        from sources.parsers.junit import parse

        with path.open("rb") as stream:
            return sum(1 for _ in parse(stream, path.name))
    if reader == "defusedxml":
        from defusedxml.ElementTree import iterparse as defused

        events = defused(str(path), forbid_dtd=True)
    else:
        from xml.etree.ElementTree import iterparse

        events = iterparse(str(path))
    count = 0
    for _event, element in events:
        if element.tag == "testcase":
            count += 1
            element.clear()
    return count


def _child(reader: str, path: Path, memory: bool) -> dict[str, float]:
    if path.is_dir():
        # The corpus: its small files read CORPUS_ROUNDS times a timing, as a service reads
        # many small reports (a parser's set-up counts here, not in the large report).
        _read(reader, path)
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            for _round in range(CORPUS_ROUNDS):
                count = _read(reader, path)
            best = min(best, (time.process_time() - started) / CORPUS_ROUNDS)
        return {"count": count, "cpu_s": best}
    _read(reader, path.with_name("one.xml"))  # imports and first-use costs, outside the clock
    if memory:
        tracemalloc.start()
        count = _read(reader, path)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return {"count": count, "peak_bytes": peak}
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        count = _read(reader, path)
        best = min(best, time.process_time() - started)
    return {"count": count, "cpu_s": best}


def _run_child(reader: str, path: Path, *extra: str, prefix: tuple[str, ...] = ()) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "bench.junit_readers", reader, str(path), *extra],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout + done.stderr


def _figures(reader: str, path: Path, memory: bool) -> dict[str, float]:
    out = _run_child(reader, path, *(["--memory"] if memory else []))
    return json.loads(out.strip().splitlines()[-1])


def _instructions(reader: str, path: Path, scratch: Path) -> int:
    """Callgrind's instruction count of reading `path` less that of reading one case; of the
    corpus (a folder): reading it 5 times less once, over 4."""
    if path.is_dir():
        totals = [
            callgrind.collected(
                _run_child(
                    reader, path, "--once", str(times), prefix=callgrind.whole_process(scratch)
                )
            )
            for times in (5, 1)
        ]
        return (totals[0] - totals[1]) // 4
    totals = []
    for report in (path, path.with_name("one.xml")):
        out = _run_child(reader, report, "--once", prefix=callgrind.whole_process(scratch))
        totals.append(callgrind.collected(out))
    return totals[0] - totals[1]


def measure(cases: int, scratch: Path, count_instructions: bool) -> dict[str, dict[str, float]]:
    report = scratch / "report.xml"
    size = write_report(report, cases)
    write_report(scratch / "one.xml", 1)
    figures: dict[str, dict[str, float]] = {}
    for reader in READERS:
        figures[reader] = {
            "bytes": size,
            **_figures(reader, report, memory=False),
            "peak_bytes": _figures(reader, report, memory=True)["peak_bytes"],
        }
    if CORPUS is not None:
        for reader in READERS:
            figures[f"corpus {reader}"] = _figures(reader, CORPUS, memory=False)
    if count_instructions and callgrind.available():
        small = scratch / "small.xml"
        write_report(small, CALLGRIND_CASES)
        for reader in READERS:
            figures[reader]["instructions"] = _instructions(reader, small, scratch)
            if CORPUS is not None:
                figures[f"corpus {reader}"]["instructions"] = _instructions(reader, CORPUS, scratch)
    # Memory against the size of the report: the parser's at a tenth of the cases.
    tenth = scratch / "tenth.xml"
    write_report(tenth, max(1, cases // 10))
    figures["parser"]["peak_bytes_tenth"] = _figures("parser", tenth, memory=True)["peak_bytes"]
    return figures


async def run(ctx: Context) -> list[Result]:
    cases = QUICK_CASES if ctx.quick else CASES
    scratch = ctx.scratch / "junit-readers"
    scratch.mkdir(parents=True, exist_ok=True)
    ctx.say(f"reading one JUnit report of {cases:,} cases with three readers")
    if not ctx.quick and not callgrind.available():
        ctx.say(f"{NAME}: instruction counts: {callgrind.SKIPPED}")
    figures = await asyncio.to_thread(measure, cases, scratch, not ctx.quick)
    floor = figures["floor"]
    results: list[Result] = []
    for reader in READERS:
        mine = figures[reader]
        ratio = mine["cpu_s"] / floor["cpu_s"]
        results.append(
            Result(
                NAME,
                f"CPU, {cases:,} cases",
                reader,
                "s",
                value=round(mine["cpu_s"], 3),
                ratio=round(ratio, 2),
                target=f"parser <= {TARGET_RATIO:g} x floor" if reader == "parser" else "",
                met=ratio <= TARGET_RATIO if reader == "parser" else None,
                note=f"best of 3, process_time; {int(mine['count']):,} records",
            )
        )
        results.append(
            Result(
                NAME,
                f"peak memory, {cases:,} cases",
                reader,
                "MiB",
                value=round(mine["peak_bytes"] / 2**20, 2),
                note="tracemalloc peak of one read",
            )
        )
        if "instructions" in mine:
            results.append(
                Result(
                    NAME,
                    f"instructions, {CALLGRIND_CASES:,} cases",
                    reader,
                    "Minstr",
                    value=round(mine["instructions"] / 1e6, 1),
                    ratio=round(mine["instructions"] / floor["instructions"], 2),
                    note="callgrind, the report less a one-case report",
                )
            )
    for reader in READERS if CORPUS is not None else ():
        mine, corpus_floor = figures[f"corpus {reader}"], figures["corpus floor"]
        ratio = mine["cpu_s"] / corpus_floor["cpu_s"]
        results.append(
            Result(
                NAME,
                "CPU, the shared corpus's 18 real reports",
                reader,
                "ms",
                value=round(mine["cpu_s"] * 1000, 2),
                ratio=round(ratio, 2),
                target=f"parser <= {TARGET_RATIO:g} x floor" if reader == "parser" else "",
                met=ratio <= TARGET_RATIO if reader == "parser" else None,
                note=f"best of 3 timings of {CORPUS_ROUNDS} reads; {int(mine['count']):,} records",
            )
        )
        if "instructions" in mine:
            results.append(
                Result(
                    NAME,
                    "instructions, the shared corpus's 18 real reports",
                    reader,
                    "Minstr",
                    value=round(mine["instructions"] / 1e6, 2),
                    ratio=round(mine["instructions"] / corpus_floor["instructions"], 2),
                    note="callgrind, 5 reads less 1, over 4",
                )
            )
    parser = figures["parser"]
    growth = (parser["peak_bytes"] - parser["peak_bytes_tenth"]) / (cases - max(1, cases // 10))
    results.append(
        Result(
            NAME,
            "parser memory per test case",
            "parser",
            "bytes",
            value=round(growth, 1),
            note="peak growth from a tenth of the cases to all: the invocation count kept per "
            "test (a hash and a number), which the stored rows need",
        )
    )
    return results


def main(argv: list[str]) -> None:
    reader, path = argv[0], Path(argv[1])
    if "--once" in argv:
        times = int(argv[argv.index("--once") + 1]) if len(argv) > 3 else 1
        print(json.dumps({"count": sum(_read(reader, path) for _ in range(times))}))
        return
    print(json.dumps(_child(reader, path, memory="--memory" in argv)))


if __name__ == "__main__":
    if len(sys.argv) > 2:
        main(sys.argv[1:])
    else:
        with tempfile.TemporaryDirectory(prefix="detective-junit-readers-") as folder:
            print(
                json.dumps(
                    measure(
                        int(sys.argv[1]) if len(sys.argv) > 1 else CASES,
                        Path(folder),
                        count_instructions=True,
                    ),
                    indent=1,
                )
            )
