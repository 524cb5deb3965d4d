from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench.junit_ingest import write_report
from sources.parsers.junit import parse


def test_the_benchmark_report_is_a_surefire_report_the_parser_reads(tmp_path: Path) -> None:
    report = tmp_path / "bench.xml"
    size = write_report(report, 1000)
    assert size > 400 * 1000  # about half a kilobyte a case, as in the full run
    with report.open("rb") as stream:
        records = list(parse(stream, "bench.xml"))
    statuses = Counter(record.status for record in records)
    # A failure every 200th case, a flaky rerun (two runs) every 500th.
    assert statuses == {"passed": 993, "failed": 5 + 2, "flaky": 2}
    assert len({record.suite for record in records}) == 4
