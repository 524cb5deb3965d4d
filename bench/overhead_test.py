"""The overhead benchmark's instruction rows: Detective against the floor per model call, and
what it says when valgrind is not there or too slow."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bench import callgrind, overhead
from bench.harness import Context


def _context(tmp_path: Path, quick: bool) -> tuple[Context, Console]:
    console = Console(record=True, width=200)
    return Context(quick=quick, console=console, scratch=tmp_path), console


async def test_without_valgrind_the_rows_are_skipped_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(callgrind, "available", lambda: False)
    ctx, console = _context(tmp_path, quick=False)
    assert await overhead.instruction_rows(ctx) == []
    assert "valgrind not installed: skipped" in console.export_text()


async def test_rows_give_each_contestant_per_model_call_and_the_ratio_to_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: list[tuple[str, bool, int, int]] = []

    def count(contestant: str, *, stream: bool, small: int, large: int, **_: Any) -> dict:
        counted.append((contestant, stream, small, large))
        per_assessment = {"floor": 15_000_000, "detective": 21_000_000}[contestant]
        return {"per_assessment": per_assessment, "per_model_call": per_assessment / 3}

    monkeypatch.setattr(callgrind, "available", lambda: True)
    monkeypatch.setattr(overhead, "count_instructions", count)
    ctx, _ = _context(tmp_path, quick=False)
    rows = await overhead.instruction_rows(ctx)

    assert sorted(counted) == [
        ("detective", False, 2, 10),
        ("detective", True, 2, 10),
        ("floor", False, 2, 10),
        ("floor", True, 2, 10),
    ]
    assert [(r.case, r.contestant) for r in rows[:2]] == [
        ("1 model call, plain: instructions", "floor (httpx loop)"),
        ("1 model call, plain: instructions", "detective"),
    ]
    floor, detective = rows[0], rows[1]
    assert (floor.value, floor.met) == (5.0, None)
    # 21 M against 15 M is 1.4x: over the 1.3x target.
    assert (detective.value, detective.ratio, detective.met) == (7.0, 1.4, False)


async def test_a_count_too_slow_for_the_machine_is_skipped_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def count(contestant: str, **_: Any) -> dict:
        raise subprocess.TimeoutExpired(["valgrind"], 75)

    monkeypatch.setattr(callgrind, "available", lambda: True)
    monkeypatch.setattr(overhead, "count_instructions", count)
    ctx, console = _context(tmp_path, quick=False)
    assert await overhead.instruction_rows(ctx) == []
    assert "skipped" in console.export_text()


async def test_quick_leaves_the_counts_to_the_full_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two children under valgrind took 30-75 s of the 90 s `--quick` has (issue 39)."""

    def count(contestant: str, **_: Any) -> dict:
        raise AssertionError("--quick must not count instructions")

    monkeypatch.setattr(callgrind, "available", lambda: True)
    monkeypatch.setattr(overhead, "count_instructions", count)
    ctx, console = _context(tmp_path, quick=True)
    assert await overhead.instruction_rows(ctx) == []
    assert "without --quick only" in console.export_text()
