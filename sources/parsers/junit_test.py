"""The JUnit XML parser on real reports: pytest's own (both families, made here by running
pytest on a small generated suite), Surefire's and jest-junit's kept samples, and hostile XML."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from sources.parsers.junit import (
    MAX_TRACEBACK_CHARS,
    JUnitError,
    ReportHeader,
    TestCaseRecord,
    parse,
)

ASSETS = Path(__file__).resolve().parents[2] / "tests" / "assets" / "junit"

SUITE = """
    import pytest

    def test_adds():
        assert 1 + 1 == 2

    def test_refund_is_partial():
        assert 40 == 0, "refund lost"

    @pytest.mark.skip(reason="no sandbox")
    def test_gateway():
        pass

    @pytest.fixture
    def broken():
        raise RuntimeError("fixture broke")

    def test_uses_broken(broken):
        pass

    @pytest.mark.parametrize("n", [1, 2])
    def test_param(n):
        assert n
"""


def pytest_report(tmp_path: Path, family: str) -> Path:
    """A JUnit XML report written by pytest itself, on SUITE, in the given family."""
    (tmp_path / "test_shop.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    report = tmp_path / f"{family}.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:django",
            "-c",
            str(tmp_path / "pytest.ini"),
            "--rootdir",
            str(tmp_path),
            f"--junitxml={report}",
            "-o",
            f"junit_family={family}",
            str(tmp_path / "test_shop.py"),
        ],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
        capture_output=True,
        check=False,  # the suite fails on purpose
    )
    assert report.is_file()
    return report


def read(path: Path) -> list[TestCaseRecord]:
    with path.open("rb") as stream:
        return list(parse(stream, path.name))


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_pytest_reports_of_both_families(tmp_path: Path, family: str) -> None:
    records = read(pytest_report(tmp_path, family))
    by_name = {record.name: record for record in records}
    assert set(by_name) == {
        "test_adds",
        "test_refund_is_partial",
        "test_gateway",
        "test_uses_broken",
        "test_param[1]",
        "test_param[2]",
    }
    assert by_name["test_adds"].status == "passed"
    assert by_name["test_adds"].classname == "test_shop"
    assert by_name["test_adds"].suite == "pytest"
    refund = by_name["test_refund_is_partial"]
    assert refund.status == "failed"
    assert "refund lost" in refund.failure_message
    assert by_name["test_gateway"].status == "skipped"
    assert by_name["test_uses_broken"].status == "error"
    assert "fixture broke" in by_name["test_uses_broken"].failure_message
    assert all(record.attempt == 1 for record in records)
    assert all(record.duration is not None for record in records)
    # xunit1 names the file of each test case; xunit2 does not.
    files = {record.file for record in records}
    assert files == ({"test_shop.py"} if family == "xunit1" else {None})


def test_surefire_reruns_become_attempts() -> None:
    records = read(ASSETS / "TEST-com.example.checkout.PaymentServiceTest.xml")
    runs = {(record.name, record.attempt): record.status for record in records}
    assert runs == {
        ("chargesCard", 1): "passed",
        # failure, then two rerunFailures: failed three times.
        ("refundsPartially", 1): "failed",
        ("refundsPartially", 2): "failed",
        ("refundsPartially", 3): "failed",
        # flakyFailure, then passed: the second run is flaky.
        ("retriesOnGatewayTimeout", 1): "failed",
        ("retriesOnGatewayTimeout", 2): "flaky",
        ("connectsToLedger", 1): "error",
        ("roundsJapaneseYen", 1): "skipped",
    }
    first_timeout = next(r for r in records if r.name == "retriesOnGatewayTimeout")
    assert first_timeout.failure_type == "java.net.SocketTimeoutException"
    assert first_timeout.failure_message == "Read timed out"
    assert {record.suite for record in records} == {"com.example.checkout.PaymentServiceTest"}


def test_jest_junit_takes_the_file_from_its_suite() -> None:
    records = read(ASSETS / "jest-junit.xml")
    assert Counter(record.status for record in records) == {
        "passed": 3,
        "failed": 1,
        "skipped": 1,
    }
    failed = next(record for record in records if record.status == "failed")
    assert failed.suite == "cart totals"
    assert failed.file == "src/cart/totals.test.ts"
    assert "Expected: 90" in failed.failure_message
    login = [record for record in records if record.suite == "login form"]
    assert {record.file for record in login} == {"src/auth/login.test.tsx"}


def test_nested_suites_and_a_test_twice_in_one_report() -> None:
    xml = b"""<?xml version="1.0"?>
    <testsuites>
      <testsuites name="outer">
        <testsuite name="api" file="api_test.py">
          <testsuite name="inner">
            <testcase classname="api" name="ok" time="0.5"/>
          </testsuite>
          <testcase classname="api" name="flaky" time="1"><failure message="boom"/></testcase>
          <testcase classname="api" name="flaky" time="1"/>
        </testsuite>
      </testsuites>
    </testsuites>"""
    records = list(parse(xml, "nested.xml"))
    # The same test twice in one report is two invocations (as TestNG writes a data-driven
    # test), not a rerun: a rerun is what the format marks as one.
    assert [(r.suite, r.name, r.invocation, r.attempt, r.status, r.file) for r in records] == [
        ("inner", "ok", 1, 1, "passed", "api_test.py"),
        ("api", "flaky", 1, 1, "failed", "api_test.py"),
        ("api", "flaky", 2, 1, "passed", "api_test.py"),
    ]


# ---- hostile and broken input ------------------------------------------------------------------

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<testsuite name="&lol4;"><testcase name="x"/></testsuite>"""

EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE testsuite [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<testsuite name="s"><testcase name="&secret;"/></testsuite>"""


@pytest.mark.parametrize("xml", [BILLION_LAUGHS, EXTERNAL_ENTITY], ids=["bomb", "external"])
def test_entities_and_dtds_are_refused(xml: bytes) -> None:
    with pytest.raises(JUnitError, match=r"^evil\.xml: refused: .*not allowed"):
        list(parse(xml, "evil.xml"))


def test_malformed_xml_names_the_file_and_the_line() -> None:
    xml = b'<testsuite name="s">\n<testcase name="a"/>\n<testcase name="b">\n</testsuite>\n'
    with pytest.raises(JUnitError) as caught:
        list(parse(xml, "broken.xml"))
    assert caught.value.filename == "broken.xml"
    assert caught.value.line == 4
    assert str(caught.value).startswith("broken.xml, line 4: malformed XML")


def test_a_report_over_the_limit_is_refused() -> None:
    xml = b"<testsuite>" + b'<testcase name="t"/>' * 1000 + b"</testsuite>"
    with pytest.raises(JUnitError, match="larger than 1,000 bytes"):
        list(parse(xml, "big.xml", max_bytes=1000))


@pytest.mark.parametrize(
    ("xml", "problem"),
    [
        (b"<html><body/></html>", "not a JUnit XML report"),
        (b"", "the report is empty"),
        (b"<testsuite><testcase name='a'/>", "malformed XML"),
    ],
)
def test_what_is_not_a_report_is_refused(xml: bytes, problem: str) -> None:
    with pytest.raises(JUnitError, match=problem):
        list(parse(xml, "other.xml"))


@pytest.mark.parametrize(
    ("time", "seconds"),
    [
        ("1.5", 1.5),
        ("1,5", 1.5),  # a decimal comma, as a locale writes it: not 15 s
        ("1,234.5", 1234.5),  # Surefire's thousands separator
        ("1,234", 1234.0),
        ("-1", None),
        ("nan", None),
        ("1,2,3", None),
        ("soon", None),
    ],
)
def test_a_duration_is_read_as_its_tool_wrote_it(time: str, seconds: float | None) -> None:
    xml = f'<testsuite name="s"><testcase name="t" time="{time}"/></testsuite>'.encode()
    (record,) = parse(xml, "t.xml")
    assert record.duration == seconds


def test_a_failure_keeps_its_message_and_a_long_traceback_its_head_and_tail() -> None:
    trace = "".join(f"  at frame{i}(File.java:{i})\n" for i in range(3000))
    xml = (
        '<testsuite name="s"><testcase name="t"><failure message="boom" type="E">'
        f"{trace}</failure><system-out>noise</system-out></testcase></testsuite>"
    ).encode()
    (record,) = parse(xml, "t.xml")
    assert record.failure_message == "boom"
    assert len(record.traceback) <= MAX_TRACEBACK_CHARS + 100
    assert record.traceback.startswith("at frame0(File.java:0)")
    assert record.traceback.endswith("at frame2999(File.java:2999)")
    assert "[... cut: the text is longer than 16,000 characters ...]" in record.traceback
    assert "noise" not in record.traceback


def test_a_surefire_flaky_run_keeps_its_stack_trace_not_its_output() -> None:
    xml = b"""<testsuite name="s"><testcase name="t" classname="C">
      <flakyFailure message="timed out" type="java.net.SocketTimeoutException">
        <stackTrace>at C.t(C.java:9)</stackTrace><system-out>log line</system-out>
      </flakyFailure></testcase></testsuite>"""
    first, second = parse(xml, "t.xml")
    assert (first.status, first.failure_message, first.traceback) == (
        "failed",
        "timed out",
        "at C.t(C.java:9)",
    )
    assert (second.status, second.attempt) == ("flaky", 2)


def test_the_header_counts_beside_the_test_cases() -> None:
    xml = b"""<testsuites><testsuite name="pytest" tests="12" failures="0">
      <testcase classname="t" name="a"/><testcase classname="t" name="b">
      <skipped type="pytest.xfail" message="known"/></testcase></testsuite></testsuites>"""
    header = ReportHeader()
    records = list(parse(xml, "t.xml", header=header))
    assert (header.tests, header.test_cases, header.not_written) == (12, 2, 10)
    assert [record.xfailed for record in records] == [False, True]
