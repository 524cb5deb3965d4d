"""The benchmark suite: which benchmarks exist, and running a selection of them.

Each benchmark is a module with `NAME` and `async def run(ctx) -> list[Result]`. A
benchmark whose subject is not there (a page not built yet, no Redis) raises `Skip`; any
other error is recorded as a failure, and the other benchmarks still run. Each has an
overall deadline, so a hang ends the run instead of CI.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import resource
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from bench.harness import Context, Report, Skip, bounded

# name -> module; imported on use, so that one benchmark's imports cannot stop the others.
BENCHMARKS: dict[str, str] = {
    "overhead": "bench.overhead",
    "context": "bench.window",
    "live": "bench.live",
    "throughput": "bench.throughput",
    "pages": "bench.pages",
    "memory": "bench.memory",
    "judge": "bench.judge",
    "git": "bench.git_range",
    "ingest": "bench.git_ingest",
    "backtest": "bench.backtest",
    "junit": "bench.junit_ingest",
    "junit-readers": "bench.junit_readers",
    "detail": "bench.release_detail",
    "summary": "bench.release_summary",
    "assessment": "bench.assessment",
    "scale": "bench.scale",
    "suspects": "bench.suspects",
    "otlp": "bench.otlp",
}
DEADLINE_S = {"quick": 120.0, "full": 900.0}


def select(only: str | None) -> list[str]:
    """The benchmarks `--only a,b` names, in suite order; all when None."""
    if not only:
        return list(BENCHMARKS)
    wanted = [name.strip() for name in only.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in BENCHMARKS]
    if unknown:
        raise ValueError(
            f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}"
        )
    return [name for name in BENCHMARKS if name in wanted]


async def run_benchmarks(
    names: Sequence[str], *, quick: bool, command: str, console: Console
) -> Report:
    report = Report(command=command, quick=quick)
    deadline = DEADLINE_S["quick" if quick else "full"]
    with tempfile.TemporaryDirectory(prefix="detective-bench-") as scratch:
        ctx = Context(quick=quick, console=console, scratch=Path(scratch))
        with ctx.stack:
            await _each(names, ctx, report, deadline)
    return report


async def _each(names: Sequence[str], ctx: Context, report: Report, deadline: float) -> None:
    console = ctx.console
    for name in names:
        started, cpu_before = time.perf_counter(), _cpu_s()
        console.print(f"[bold]{name}[/bold]")
        try:
            module = importlib.import_module(BENCHMARKS[name])
            # A benchmark that loads a large dataset twice (scale) says how long it may take.
            own = getattr(module, "DEADLINE_S", {}).get("quick" if ctx.quick else "full")
            rows = await bounded(module.run(ctx), own or deadline, f"benchmark {name}")
            report.add(rows)
        except Skip as skip:
            report.failures[name] = f"skipped: {skip}"
            console.print(f"[yellow]{name} skipped:[/yellow] {skip}")
        except Exception as error:
            report.failures[name] = f"{type(error).__name__}: {error}"
            console.print(f"[red]{name} failed[/red]")
            console.print(traceback.format_exc(), markup=False, highlight=False)
        report.durations_s[name] = round(time.perf_counter() - started, 2)
        report.cpu_s[name] = round(_cpu_s() - cpu_before, 2)
        report.load_after[name] = round(os.getloadavg()[0], 2)
        console.print(
            f"[dim]{name}: {report.durations_s[name]:.1f} s wall, {report.cpu_s[name]:.1f} s CPU"
            f" (load {report.load_after[name]:.1f})[/dim]"
        )


def _cpu_s() -> float:
    """CPU seconds of this process and all it started: the children it has waited for, and
    those still running (the sites and drivers a benchmark keeps for later ones), with what
    they have waited for in turn (Linux's /proc; without it, the waited-for ones only)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return total + _running_descendants_cpu_s()


def _running_descendants_cpu_s() -> float:
    parent_of: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            # After the command's closing parenthesis: state, ppid, ... utime (14th field)
            # stime, cutime, cstime.
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.parent.name)
        parent_of[pid] = int(fields[1])
        ticks[pid] = sum(int(value) for value in fields[11:15])
    mine = {os.getpid()}
    grew = True
    while grew:
        found = {pid for pid, parent in parent_of.items() if parent in mine} - mine
        grew = bool(found)
        mine |= found
    mine.discard(os.getpid())
    return sum(ticks[pid] for pid in mine) / os.sysconf("SC_CLK_TCK")


def crashed(report: Report) -> list[str]:
    """The benchmarks that failed for a reason other than a skip."""
    return [name for name, why in report.failures.items() if not why.startswith("skipped:")]


def run(names: Sequence[str], *, quick: bool, command: str, console: Console) -> Report:
    return asyncio.run(run_benchmarks(names, quick=quick, command=command, console=console))
