from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from evals.compare import compare_runs
from evals.reports import json_report, markdown_report, write_reports
from evals.stats import MeanStat, RunSummary, ScenarioSummary


def _scenario(
    sid: str, passed: int, failed: int, errored: int = 0, *, critical: bool = False
) -> ScenarioSummary:
    scores = [1.0] * passed + [0.5] * failed
    stat = MeanStat.of(scores)
    return ScenarioSummary(
        scenario_id=sid,
        title=f"Title of {sid} | with a pipe",
        critical=critical,
        trials=passed + failed + errored,
        passed=passed,
        failed=failed,
        errored=errored,
        scores={"tool_usage": stat, "decision_quality": stat} if stat else {},
        severities={"high": passed + failed},
        failure_reasons={"decision_quality: severity (filed low, expected high)": failed}
        if failed
        else {},
        input_tokens=1000,
        output_tokens=100,
        cost_usd=0.02,
        latency_ms=MeanStat.of([2000.0, 4000.0], bounded=False),
    )


@pytest.fixture
def baseline() -> RunSummary:
    return RunSummary.build(
        [_scenario("a", 3, 0, critical=True), _scenario("b", 3, 0), _scenario("c", 3, 0)],
        run_id="1",
        label="baseline",
        suite_version="1.0.0",
    )


@pytest.fixture
def current() -> RunSummary:
    return RunSummary.build(
        [_scenario("a", 1, 2, critical=True), _scenario("b", 3, 0), _scenario("c", 2, 0, 1)],
        run_id="2",
        label="candidate",
        suite_version="1.0.0",
        created_at=datetime(2025, 6, 1, 12, 0, tzinfo=UTC),
        metadata={"provider": "scripted", "model": "worse"},
    )


def test_json_report_has_the_specification_format(current: RunSummary) -> None:
    report = json_report(current)
    summary = report["summary"]
    assert summary["total_scenarios"] == 3
    assert summary["pass_rate"] == pytest.approx(6 / 8, abs=1e-4)
    assert set(summary["avg_scores"]) == {"tool_usage", "decision_quality"}
    assert [s["id"] for s in report["scenarios"]] == ["a", "b", "c"]
    assert {s["status"] for s in report["scenarios"]} == {"flaky", "passed"}
    assert report["scenarios"][0]["scores"]["tool_usage"] == pytest.approx(2 / 3, abs=1e-4)
    assert report["regression_analysis"] == {
        "baseline_run_id": None,
        "verdict": None,
        "regressions": [],
        "improvements": [],
    }
    # The extra fields.
    assert summary["errored"] == 1 and summary["passed"] == 6 and summary["failed"] == 2
    assert summary["pass_hat_k"] == pytest.approx(2 / 3, abs=1e-4)
    assert len(summary["pass_rate_ci"]) == 2
    assert summary["tokens"] == {"input": 3000, "output": 300, "total": 3300}
    assert summary["cost_usd"] == pytest.approx(0.06)
    assert summary["latency_ms"]["mean"] == 3000.0
    assert report["run"]["created_at"] == "2025-06-01T12:00:00+00:00"
    json.dumps(report)  # plain JSON all the way down


def test_json_report_carries_the_comparison(current: RunSummary, baseline: RunSummary) -> None:
    comparison = compare_runs(current, baseline)
    analysis = json_report(current, comparison)["regression_analysis"]
    assert analysis["verdict"] == "fail"
    assert analysis["baseline_run_id"] == "1"
    assert analysis["regressions"][0]["key"] == "a"
    assert analysis["regressions"][0]["critical"] is True
    assert analysis["scenario_deltas"][0]["id"] == "a"
    assert analysis["rules"]["min_delta"] == 0.05
    json.dumps(analysis)


def test_markdown_report_has_tables_and_the_verdict_on_top(
    current: RunSummary, baseline: RunSummary
) -> None:
    text = markdown_report(current, compare_runs(current, baseline))
    lines = text.splitlines()
    assert lines[0] == "# Evaluation report: candidate"
    assert "provider: scripted" in text
    verdict_at = next(i for i, line in enumerate(lines) if line.startswith("## Verdict"))
    summary_at = lines.index("## Summary")
    assert verdict_at < summary_at
    assert "**FAIL**" in lines[verdict_at]
    assert "| Pass rate (95% CI) | 75% (41%-93%) |" in lines
    assert "## Regressions" in lines
    scenario_rows = [line for line in lines if line.startswith("| a (critical)")]
    assert scenario_rows and "regression" in scenario_rows[0]
    # Every table row has as many cells as its header.
    for i, line in enumerate(lines):
        if line.startswith("|---"):
            width = lines[i - 1].count(" | ")
            for row in lines[i + 1 :]:
                if not row.startswith("|"):
                    break
                assert row.replace("\\|", "").count(" | ") == width, row


def test_markdown_without_a_comparison(current: RunSummary) -> None:
    text = markdown_report(current)
    assert "## Verdict" not in text
    assert "## Regressions" not in text
    assert "| c | passed | 2/2 (+1 errored) |" in text


def test_write_reports(tmp_path: Path, current: RunSummary, baseline: RunSummary) -> None:
    comparison = compare_runs(current, baseline)
    json_path, md_path = tmp_path / "r.json", tmp_path / "r.md"
    write_reports(current, comparison, json_path=json_path, markdown_path=md_path)
    assert json.loads(json_path.read_text())["regression_analysis"]["verdict"] == "fail"
    assert md_path.read_text().startswith("# Evaluation report")
