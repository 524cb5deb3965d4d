from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

from django.core.management import call_command

from bench.judge import windows
from risk.judge import judge


def test_the_benchmark_windows_are_a_regression_of_the_asked_size() -> None:
    baseline, current = windows(10_000, 3)
    assert (
        sorted(baseline)
        == sorted(current)
        == ["error_rate", "response_time_p50", "response_time_p95"]
    )
    assert all(len(v) == 10_000 for v in [*baseline.values(), *current.values()])
    result = judge(baseline, current)
    assert result.outcome == "fail"
    assert {m.name for m in result.metrics if m.outcome == "fail"} == {
        "error_rate",
        "response_time_p95",
    }  # the median latency rose 1.2 times: within the 1.5 allowed


def test_bench_prints_the_judges_figures(tmp_path: Path) -> None:
    out = StringIO()
    call_command(
        "bench", "--quick", "--only", "judge", "--json", str(tmp_path / "b.json"), stdout=out
    )
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["failures"] == {}
    assert [row["case"] for row in data["results"]] == [
        "1 metric, 2 x 10,000",
        "3 metrics, 2 x 10,000",
        "3 metrics, 2 x 60",
    ]
    assert all(row["stats"]["n"] >= 1 and row["stats"]["median"] > 0 for row in data["results"])
    assert "3 metrics, 2 x 10,000" in out.getvalue()
