"""Instruction counts from valgrind's callgrind, which count the same however busy the machine is.

Two ways, both run a child Python process under callgrind:

- the whole process (`whole_process`): its total, start and imports included; a benchmark takes
  the difference of two runs (a large input less a tiny one) so that those cancel out;
- a section of the process (`Section`, inside the child, with `section_command` outside): the
  child starts with instrumentation off, so its start and imports run at valgrind's cheaper
  uninstrumented pace and are not counted, then turns it on around the work with
  `callgrind_control` (valgrind's gdb server, on its own pid), zeroes, and dumps after each
  batch. Each dump file holds the count since the previous one; the difference of two batches
  of different sizes, divided by the difference of their sizes, is one unit of work, with the
  cost of the `callgrind_control` calls themselves cancelled out.

`available()` says whether the tool is here; a benchmark without it prints `SKIPPED` and
reports its other figures (`.ci/run` does not require valgrind).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

SKIPPED = "valgrind not installed: skipped"
_COLLECTED = re.compile(r"Collected : (\d+)")
_SUMMARY = re.compile(r"^summary: (\d+)$", re.MULTILINE)


def available() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def whole_process(out_dir: Path) -> tuple[str, ...]:
    """The prefix that counts a whole process; its total is in its output (`collected`)."""
    return ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir}/cg.%p")


def section_command(out_dir: Path) -> tuple[str, ...]:
    """The prefix for a child that counts its own sections with `Section`."""
    return (
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out_dir}/cg.%p",
    )


def collected(output: str) -> int:
    """The total callgrind printed when the process ended."""
    found = _COLLECTED.search(output)
    if found is None:
        raise RuntimeError(f"callgrind gave no count: {output[-300:]}")
    return int(found.group(1))


def per_unit(counts: Sequence[int], sizes: Sequence[int]) -> float:
    """Instructions per unit of work from two batches: their difference over their sizes'."""
    if len(counts) != 2 or len(sizes) != 2 or sizes[1] == sizes[0]:
        raise ValueError("two batches of different sizes are needed")
    return (counts[1] - counts[0]) / (sizes[1] - sizes[0])


class Section:
    """Inside a child started with `section_command`: count batches of work.

    `start()` turns instrumentation on and zeroes the counters; `dump()` ends a batch and
    returns its count (read back from the dump file callgrind wrote); `stop()` turns
    instrumentation off again.
    """

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.pid = os.getpid()
        self.parts = 0

    def _control(self, *args: str) -> None:
        # Runs synchronously: this process waits in a system call, where valgrind's gdb
        # server reaches it.
        done = subprocess.run(
            ["callgrind_control", *args, str(self.pid)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"callgrind_control {' '.join(args)}: {done.stderr or done.stdout}")

    def start(self) -> None:
        self._control("--instr=on")
        self._control("--zero")

    def dump(self) -> int:
        self._control("--dump")
        self.parts += 1
        text = Path(self.out_dir, f"cg.{self.pid}.{self.parts}").read_text()
        found = _SUMMARY.search(text)
        if found is None:
            raise RuntimeError(f"callgrind's dump {self.parts} has no summary line")
        return int(found.group(1))

    def stop(self) -> None:
        self._control("--instr=off")
