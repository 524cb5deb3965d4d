"""The mixed report holds what each tool writes, as the project's parser reads it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench.junit_shapes import write_mixed_report
from sources.parsers.junit import ReportHeader, parse


def test_the_mixed_report_has_each_tools_shape(tmp_path: Path) -> None:
    report = tmp_path / "mixed.xml"
    write_mixed_report(report, 600)
    header = ReportHeader()
    with report.open("rb") as stream:
        records = list(parse(stream, report.name, header=header))
    assert header.test_cases == 600
    by_suite = Counter(record.suite.split(".")[0].split("/")[0] for record in records)
    assert by_suite == {"pytest": 200, "com": 204, "src": 200}
    statuses = Counter(record.status for record in records)
    # Failed: pytest 20 (every 10th), Surefire 10 (every 20th) and the 4 flaky cases' first
    # runs, jest 13 (every 15th); skipped: pytest's 4 xfails and 8 skips.
    assert statuses == {"passed": 541, "failed": 47, "skipped": 12, "flaky": 4}
    pytest_failure = next(r for r in records if r.suite == "pytest" and r.status == "failed")
    assert pytest_failure.file == "tests/orders/test_checkout.py"
    assert "assert 500 == 201" in pytest_failure.traceback
    jest_failure = next(r for r in records if r.suite.startswith("src/") and r.status == "failed")
    # jest-junit writes no message attribute: the message is the text.
    assert jest_failure.failure_message.startswith("Error: expect(received).toBe(expected)")
    assert any(r.xfailed for r in records)
