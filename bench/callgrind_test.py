"""Callgrind's counts: the arithmetic, the parsing, and a real count of a section when
valgrind is here (the benchmark skips without it, and so does that test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import callgrind

CHILD = """
import json, sys
from pathlib import Path
from bench.callgrind import Section

def work(n):
    total = 0
    for i in range(n):
        total += i * i
    return total

section = Section(Path(sys.argv[1]))
work(1000)
section.start()
counts = []
for size in (20_000, 60_000):
    work(size)
    counts.append(section.dump())
section.stop()
print(json.dumps(counts))
"""


def test_per_unit_is_the_difference_of_two_batches_over_their_sizes() -> None:
    # A fixed cost of 500 per batch and 100 a unit: 1 unit -> 600, 5 units -> 1,000.
    assert callgrind.per_unit([600, 1_000], [1, 5]) == 100


def test_per_unit_needs_two_batches_of_different_sizes() -> None:
    with pytest.raises(ValueError, match="different sizes"):
        callgrind.per_unit([600, 600], [3, 3])
    with pytest.raises(ValueError):
        callgrind.per_unit([600], [1])


def test_collected_reads_the_total_callgrind_prints_at_exit() -> None:
    output = "==123== Events    : Ir\n==123== Collected : 6596810578\n==123==\n"
    assert callgrind.collected(output) == 6_596_810_578
    with pytest.raises(RuntimeError, match="no count"):
        callgrind.collected("valgrind: command not found")


@pytest.mark.skipif(not callgrind.available(), reason=callgrind.SKIPPED)
def test_a_section_counts_its_batches_and_not_the_start(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    done = subprocess.run(
        [*callgrind.section_command(tmp_path), sys.executable, str(script), str(tmp_path)],
        cwd=Path(__file__).resolve().parents[1],
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[1]), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-500:]
    small, large = json.loads(done.stdout.strip().splitlines()[-1])
    # The interpreter's start (tens of millions of instructions) is not in the first batch.
    per_iteration = callgrind.per_unit([small, large], [20_000, 60_000])
    assert small < 40_000_000
    # A loop iteration of `total += i * i` is some tens to a few hundred instructions.
    assert 20 < per_iteration < 1_000
    assert large > 2.5 * small
