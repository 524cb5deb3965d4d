"""The readers' benchmark reads the same report with all three readers and measures each."""

from __future__ import annotations

from pathlib import Path

from bench.junit_readers import READERS, _read, measure
from bench.junit_shapes import write_mixed_report


def test_the_three_readers_read_the_same_test_cases(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    write_mixed_report(report, 1000)
    counts = {reader: _read(reader, report) for reader in READERS}
    # The parser gives a record per run: a flaky case (every 50th of the Surefire suites,
    # 200 to 399 and 800 to 999 here) is two.
    assert counts == {"floor": 1000, "defusedxml": 1000, "parser": 1008}


def test_each_reader_is_measured_in_a_process_of_its_own(tmp_path: Path) -> None:
    figures = measure(500, tmp_path, count_instructions=False)
    for reader in READERS:
        assert figures[reader]["cpu_s"] > 0
        assert figures[reader]["peak_bytes"] > 0
        assert "instructions" not in figures[reader]
    assert figures["parser"]["count"] == 504  # 4 flaky cases in the Surefire suite
    assert figures["parser"]["peak_bytes_tenth"] > 0
