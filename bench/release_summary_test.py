from __future__ import annotations

import pytest

from bench.release_summary import MAX_QUERIES, TARGET_MS, rows
from bench.suite import BENCHMARKS, select


def test_the_summary_is_a_benchmark_of_the_suite() -> None:
    assert BENCHMARKS["summary"] == "bench.release_summary"
    assert select("summary") == ["summary"]


@pytest.mark.parametrize(("queries", "met"), [([5, 6, 6], True), ([6, 7], False)])
def test_the_rows_hold_the_time_and_the_most_queries_against_the_targets(
    queries: list[int], met: bool
) -> None:
    measured = {"ms": [4.0, 6.0, 30.0], "cpu_ms": [3.0, 5.0, 11.0], "queries": queries}
    time, cpu, counted = rows({**measured, "releases": ["v1", "v2"]})
    assert time.stats is not None and time.stats.median == 6.0
    assert time.met is (TARGET_MS >= 6.0)
    assert cpu.stats is not None and cpu.stats.median == 5.0
    assert counted.value == max(queries) and counted.met is met
    assert counted.target == f"<= {MAX_QUERIES} queries"
