from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.console import Console

from bench import suite
from bench.harness import (
    Report,
    Result,
    Stats,
    format_number,
    interleave,
    markdown_table,
    percentile,
    ratio_rows,
    render,
    rotation,
    table_rows,
)


def test_percentiles_interpolate_between_ranks() -> None:
    samples = [4.0, 1.0, 3.0, 2.0, 5.0]
    assert percentile(samples, 0) == 1.0
    assert percentile(samples, 50) == 3.0
    assert percentile(samples, 100) == 5.0
    assert percentile(samples, 95) == pytest.approx(4.8)
    assert percentile([7.0], 95) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_stats_summarise_samples() -> None:
    stats = Stats.of([1.0, 2.0, 3.0, 10.0])
    assert (stats.n, stats.median, stats.min, stats.max, stats.mean) == (4, 2.5, 1.0, 10.0, 4.0)
    assert stats.p95 == pytest.approx(8.95)


def test_each_round_rotates_the_order() -> None:
    names = ["a", "b", "c"]
    assert [rotation(names, i) for i in range(4)] == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
        ["a", "b", "c"],
    ]
    assert rotation([], 3) == []


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_interleaving_warms_up_then_times_each_contestant_per_round() -> None:
    clock = FakeClock()
    calls: list[str] = []

    def contestant(name: str, cost: float):  # type: ignore[no-untyped-def]
        async def run() -> None:
            calls.append(name)
            clock.now += cost

        return run

    measured = await interleave(
        {"floor": contestant("floor", 0.001), "agent": contestant("agent", 0.002)},
        rounds=3,
        warmup=2,
        clock=clock,
    )
    # Two warm-up rounds, then three measured ones, the order rotating every round.
    warm_up = ["floor", "agent", "agent", "floor"]
    measured_rounds = ["floor", "agent", "agent", "floor", "floor", "agent"]
    assert calls == [*warm_up, *measured_rounds]
    assert measured.rounds == 3 and not measured.stopped_early
    assert measured.samples["floor"] == pytest.approx([1.0, 1.0, 1.0])
    assert measured.samples["agent"] == pytest.approx([2.0, 2.0, 2.0])


async def test_contestants_may_report_their_own_samples() -> None:
    async def latencies() -> Sequence[float]:
        return [5.0, 6.0]

    measured = await interleave({"live": latencies}, rounds=2, warmup=0)
    assert measured.samples["live"] == [5.0, 6.0, 5.0, 6.0]


async def test_the_time_budget_ends_measuring_after_at_least_one_round() -> None:
    clock = FakeClock()

    async def slow() -> None:
        clock.now += 10

    measured = await interleave({"slow": slow}, rounds=100, warmup=1, time_budget_s=15, clock=clock)
    assert measured.rounds == 2
    assert measured.stopped_early
    assert len(measured.samples["slow"]) == 2


def test_ratio_rows_compare_medians_with_the_reference() -> None:
    rows = ratio_rows(
        "overhead",
        "plain",
        {"floor": [2.0, 2.0, 2.0], "fast": [2.5, 2.5, 3.0], "slow": [4.0, 4.0, 4.0]},
        reference="floor",
        limit=1.5,
        target="<= 1.5x floor",
    )
    by_name = {row.contestant: row for row in rows}
    assert by_name["floor"].ratio == 1.0 and by_name["floor"].met is None
    assert by_name["floor"].target == "(reference)"
    assert by_name["fast"].ratio == 1.25 and by_name["fast"].met is True
    assert by_name["slow"].ratio == 2.0 and by_name["slow"].met is False


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (0.0, "0"),
        (0.01234, "0.0123"),
        (4.567, "4.57"),
        (78.94, "78.9"),
        (1234.4, "1,234"),
    ],
)
def test_numbers_get_three_significant_figures(value: float | None, text: str) -> None:
    assert format_number(value) == text


def results() -> list[Result]:
    return [
        Result("overhead", "plain", "floor", "ms", Stats.of([2.0, 4.0]), ratio=1.0),
        Result(
            "memory",
            "idle",
            "web | process",
            "MiB",
            value=98.25,
            target="<= 150 MiB",
            met=True,
            note="VmRSS",
        ),
        Result("memory", "run", "worker", "MiB", value=170.0, target="<= 150 MiB", met=False),
    ]


def test_table_cells() -> None:
    rows = table_rows(results())
    assert rows[0] == ("overhead", "plain", "floor", "3.00 ms", "3.90 ms", "2", "1.00x", "", "")
    assert rows[1] == (
        "memory",
        "idle",
        "web | process",
        "98.2 MiB",
        "",
        "",
        "",
        "<= 150 MiB",
        "yes",
    )
    assert rows[2][-1] == "NO"


def test_the_markdown_table_escapes_pipes() -> None:
    lines = markdown_table(results()).splitlines()
    assert lines[0].startswith("| benchmark | case |")
    assert "web \\| process" in lines[3]
    assert len(lines) == 5


def test_render_and_json(tmp_path: Path) -> None:
    report = Report(command="uv run manage.py bench --quick", quick=True)
    report.add(results())
    report.failures["pages"] = "skipped: no run page yet"
    console = Console(record=True, width=200)
    render(report, console)
    text = console.export_text()
    assert "overhead" in text and "NO" in text and "pages did not run" in text
    path = tmp_path / "out" / "bench.json"
    report.write_json(path)
    data = json.loads(path.read_text())
    assert data["quick"] is True
    assert data["machine"]["cpus"]
    assert data["results"][0]["stats"]["median"] == 3.0
    assert data["results"][1]["stats"] is None
    assert suite.crashed(report) == []
    report.failures["live"] = "RuntimeError: boom"
    assert suite.crashed(report) == ["live"]


def test_only_selects_known_benchmarks_in_suite_order() -> None:
    assert suite.select(None) == list(suite.BENCHMARKS)
    assert suite.select("pages, overhead") == ["overhead", "pages"]
    with pytest.raises(ValueError, match="nope"):
        suite.select("overhead,nope")


async def test_a_frozen_heap_is_thawed_afterwards() -> None:
    import gc

    seen: list[int] = []

    async def contestant() -> None:
        seen.append(gc.get_freeze_count())

    # An entry point run earlier in this process (`run_evals`) may have frozen its heap.
    gc.unfreeze()
    await interleave({"x": contestant}, rounds=2, warmup=1, freeze_heap=True)
    assert seen[0] == 0  # the warm-up, before freezing
    assert all(count > 0 for count in seen[1:])
    assert gc.get_freeze_count() == 0
