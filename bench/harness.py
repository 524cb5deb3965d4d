"""The benchmark harness: statistics, interleaved rounds, results, the table and the JSON.

Contestants of one benchmark run in the same process, in the same run, round by round:
each round runs every contestant once, and the order rotates from round to round, so that
a noisy neighbour on the 2 shared cores (or a warming cache) hits every contestant alike
instead of whichever happened to run during it. Warm-up rounds run first and are thrown
away. Every loop is bounded twice: by a number of rounds and by a time budget.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

# A contestant runs once per call. It may return its own samples (latencies it measured
# inside, in the unit of its benchmark); when it returns None the harness times the call.
Contestant = Callable[[], Awaitable[Sequence[float] | None]]


class Skip(Exception):
    """The benchmark cannot run here (what it measures is missing); the message says why."""


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear between the closest ranks (numpy's default)."""
    if not samples:
        raise ValueError("no samples")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is not between 0 and 100")
    ordered = sorted(samples)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Stats:
    n: int
    median: float
    p95: float
    mean: float
    min: float
    max: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        if not samples:
            raise ValueError("no samples")
        return cls(
            n=len(samples),
            median=statistics.median(samples),
            p95=percentile(samples, 95),
            mean=statistics.fmean(samples),
            min=min(samples),
            max=max(samples),
        )


def rotation(names: Sequence[str], round_index: int) -> list[str]:
    """The order of the contestants in one round: the list rotated by the round's number."""
    if not names:
        return []
    shift = round_index % len(names)
    return [*names[shift:], *names[:shift]]


@dataclass
class Measurement:
    samples: dict[str, list[float]]
    rounds: int
    stopped_early: bool


async def interleave(
    contestants: Mapping[str, Contestant],
    *,
    rounds: int,
    warmup: int = 1,
    time_budget_s: float = 30.0,
    scale: float = 1000.0,
    clock: Callable[[], float] = time.perf_counter,
    collect_garbage: bool = False,
    freeze_heap: bool = False,
) -> Measurement:
    """Run `warmup` rounds, then up to `rounds` measured rounds of every contestant.

    Measured rounds stop early when `time_budget_s` is spent (after at least one), so a
    slow machine shortens a benchmark rather than hangs it. Times the harness takes are
    multiplied by `scale` (seconds to milliseconds by default); samples a contestant
    returns are kept as they are. `collect_garbage` runs a full collection before each
    measured call (outside its time), so that a collection the setup made due does not
    land on whichever contestant happens to allocate next. `freeze_heap` moves everything
    alive after the warm-up out of the collector's sight (`gc.freeze()`) while measuring:
    a full collection of the process's start-up heap (Django, OpenTelemetry: ~120,000
    objects) pauses for hundreds of milliseconds here, once in a few hundred rounds, on
    whichever contestant allocates when it falls due.
    """
    names = list(contestants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(warmup):
        for name in rotation(names, index):
            await contestants[name]()
    if freeze_heap:
        gc.collect()
        gc.freeze()
    try:
        return await _measure(
            contestants, names, samples, rounds, time_budget_s, scale, clock, collect_garbage
        )
    finally:
        if freeze_heap:
            gc.unfreeze()


async def _measure(
    contestants: Mapping[str, Contestant],
    names: list[str],
    samples: dict[str, list[float]],
    rounds: int,
    time_budget_s: float,
    scale: float,
    clock: Callable[[], float],
    collect_garbage: bool,
) -> Measurement:
    started = clock()
    done = 0
    stopped_early = False
    for index in range(rounds):
        if done and clock() - started > time_budget_s:
            stopped_early = True
            break
        for name in rotation(names, index):
            if collect_garbage:
                gc.collect()
            begin = clock()
            own = await contestants[name]()
            elapsed = clock() - begin
            if own is None:
                samples[name].append(elapsed * scale)
            else:
                samples[name].extend(own)
        done += 1
    return Measurement(samples=samples, rounds=done, stopped_early=stopped_early)


def run_sync(contestant: Callable[[], Sequence[float] | None]) -> Contestant:
    """A synchronous contestant as one the harness can await."""

    async def run() -> Sequence[float] | None:
        return contestant()

    return run


@dataclass
class Result:
    """One row of the table: a contestant's figure in one case of one benchmark."""

    benchmark: str
    case: str
    contestant: str
    unit: str
    stats: Stats | None = None
    # A single figure where there is no distribution (memory, a wall time...).
    value: float | None = None
    ratio: float | None = None  # to the case's reference contestant
    target: str = ""
    met: bool | None = None  # None: no target for this row, or not measurable
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def figure(self) -> float | None:
        return self.stats.median if self.stats is not None else self.value


def ratio_rows(
    benchmark: str,
    case: str,
    samples: Mapping[str, Sequence[float]],
    *,
    reference: str,
    unit: str = "ms",
    limit: float | None = None,
    target: str = "",
) -> list[Result]:
    """Rows for contestants compared with a reference: medians, p95, and the ratio of
    medians, checked against `limit` for every contestant but the reference."""
    base = statistics.median(samples[reference])
    rows = []
    for name, values in samples.items():
        stats = Stats.of(values)
        ratio = stats.median / base if base > 0 else None
        is_reference = name == reference
        rows.append(
            Result(
                benchmark=benchmark,
                case=case,
                contestant=name,
                unit=unit,
                stats=stats,
                ratio=ratio,
                target="(reference)" if is_reference else target,
                met=None if is_reference or limit is None or ratio is None else ratio <= limit,
            )
        )
    return rows


@dataclass
class Context:
    """What every benchmark gets: the size of the run, and where to say what it does."""

    quick: bool
    console: Console
    scratch: Path
    # What one benchmark prepared and another may reuse (the page benchmark's site).
    shared: dict[str, Any] = field(default_factory=dict)
    # Closed when the whole run ends: processes a later benchmark may still use.
    stack: ExitStack = field(default_factory=ExitStack)

    def say(self, text: str) -> None:
        self.console.print(f"[dim]{text}[/dim]")


@dataclass
class Report:
    command: str
    quick: bool
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    results: list[Result] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # benchmark -> why it did not run
    durations_s: dict[str, float] = field(default_factory=dict)
    # CPU seconds of each benchmark (this process and the children it waited for), and the
    # 1-minute load average when it ended: on the shared machine the wall time waits for a core.
    cpu_s: dict[str, float] = field(default_factory=dict)
    load_after: dict[str, float] = field(default_factory=dict)

    def add(self, rows: Iterable[Result]) -> None:
        self.results.extend(rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "quick": self.quick,
            "started_at": self.started_at,
            "machine": machine(),
            "durations_s": self.durations_s,
            "cpu_s": self.cpu_s,
            "load_after": self.load_after,
            "failures": self.failures,
            "results": [_row_json(row) for row in self.results],
        }

    def write_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")


def _row_json(row: Result) -> dict[str, Any]:
    data = asdict(row)
    data["stats"] = asdict(row.stats) if row.stats is not None else None
    return data


def machine() -> dict[str, Any]:
    load: list[float] | None
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": load,
    }


def format_number(value: float | None) -> str:
    """Three significant figures, thousands separated: 0.0123, 4.56, 78.9, 1,234."""
    if value is None or math.isnan(value):
        return "-"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    if magnitude == 0:
        return "0"
    return f"{value:.3g}"


def verdict(met: bool | None) -> str:
    return {True: "yes", False: "NO", None: ""}[met]


COLUMNS = ("benchmark", "case", "contestant", "median", "p95", "n", "ratio", "target", "met")


def table_rows(results: Sequence[Result]) -> list[tuple[str, ...]]:
    """The table as text cells, one tuple per result (COLUMNS)."""
    rows = []
    for row in results:
        if row.stats is not None:
            median = f"{format_number(row.stats.median)} {row.unit}"
            p95 = f"{format_number(row.stats.p95)} {row.unit}"
            count = str(row.stats.n)
        elif row.value is not None and row.unit == "queries":
            median, p95, count = f"{row.value:.0f} queries", "", ""
        else:
            median = f"{format_number(row.value)} {row.unit}" if row.value is not None else "-"
            p95, count = "", ""
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else ""
        rows.append(
            (
                row.benchmark,
                row.case,
                row.contestant,
                median,
                p95,
                count,
                ratio,
                row.target,
                verdict(row.met),
            )
        )
    return rows


def render(report: Report, console: Console) -> None:
    table = Table(title=f"Benchmarks ({report.command})", show_lines=False)
    for column in COLUMNS:
        justify = "right" if column in ("median", "p95", "n", "ratio") else "left"
        table.add_column(column, justify=justify)
    previous = None
    for cells, row in zip(table_rows(report.results), report.results, strict=True):
        if previous is not None and row.benchmark != previous:
            table.add_section()
        previous = row.benchmark
        style = "red" if row.met is False else None
        table.add_row(*cells, style=style)
    console.print(table)
    for row in report.results:
        if row.note:
            console.print(
                f"  [dim]{row.benchmark} / {row.case} / {row.contestant}:[/dim] {row.note}"
            )
    for name, why in report.failures.items():
        console.print(f"[red]{name} did not run:[/red] {why}")


def markdown_table(results: Sequence[Result]) -> str:
    """The table as Markdown, for docs/developing/benchmarks.md."""
    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "| "
        + " | ".join("---:" if c in ("median", "p95", "n", "ratio") else "---" for c in COLUMNS)
        + " |",
    ]
    for cells in table_rows(results):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


async def bounded(awaitable: Awaitable[Any], seconds: float, what: str) -> Any:
    """Await with a deadline that names what took too long (a TimeoutError from inside,
    before the deadline, goes through as it is)."""
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return await awaitable
    except TimeoutError:
        if deadline.expired():
            raise TimeoutError(f"{what} took longer than {seconds:g} s") from None
        raise
