"""Reports written by a real pytest run (a subprocess, `--junitxml`), ingested and judged:
failing subtests counted apart from the tests, a run stopped by KeyboardInterrupt (Ctrl-C, a
time box's SIGINT) marked interrupted, and a run stopped by `-x` judged against the service's
earlier releases: never a complete, passing run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from detective_client import summary
from releases.management.commands.verdict import markdown as command_markdown
from releases.models import Release
from releases.release_verdict import verdict_of
from risk.run_counts import results_said
from sources import services
from sources.judging import judge_release
from sources.models import TestCase
from sources.services import Origin, ReleaseFields

pytestmark = pytest.mark.django_db

API = Origin("api")

SUBTESTS = """
def test_many(subtests):
    for i in range(5):
        with subtests.test(msg="check", i=i):
            assert i % 2 == 0

def test_plain():
    assert True

def test_allsub(subtests):
    for i in range(3):
        with subtests.test(i=i):
            assert i < 1
"""

FORTY = """
import os
import pytest

@pytest.mark.parametrize("i", range(40))
def test_n(i):
    if i == 5 and os.environ.get("STOP") == "interrupt":
        raise KeyboardInterrupt  # what Ctrl-C or `timeout -s INT` raises in the running test
    if i == 5 and os.environ.get("STOP") == "fail":
        assert False
"""


def _pytest_report(folder: Path, source: str, *args: str, stop: str = "") -> Path:
    """Runs pytest on `source` in `folder` as a CI job would, and returns its JUnit report."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_it.py").write_text(source)
    report = folder / "report.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    env["STOP"] = stop
    subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:django"),
            *("-p", "no:xdist", "-p", "no:randomly", f"--junitxml={report}", *args, "test_it.py"),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert report.exists()
    return report


def _ingest(version: str, report: Path) -> Release:
    release, _ = services.upsert_release(ReleaseFields(version=version, service="pkg"), API)
    with report.open("rb") as stream:
        services.ingest_junit(release, stream, report.name, API)
    release.refresh_from_db()
    return release


def test_failing_subtests_are_counted_apart_from_the_tests(tmp_path: Path) -> None:
    # pytest says "6 failed, 1 passed, 4 subtests passed": 2 of its 3 tests failed, and 4 of
    # their 8 subtests.
    release = _ingest("1.0", _pytest_report(tmp_path, SUBTESTS))
    tests = release.test_results
    assert tests is not None
    assert (tests["passed"], tests["failed"]) == (1, 2)
    assert (tests["not_in_test_cases"], tests["failed_subtests"]) == (8, 4)
    assert results_said(tests) == "3 tests (2 failed, 1 passed) and 8 subtests (4 failed)"
    failed = next(s for s in judge_release(release).verdict.signals if s.name == "failed_tests")
    assert failed.figure == 2
    assert failed.detail.endswith("; 4 of 8 subtests failed")
    # The gate's verdict and both its Markdowns say tests and subtests apart.
    verdict = verdict_of(release)
    assert verdict.tests == "3 tests (2 failed, 1 passed) and 8 subtests (4 failed)"
    said = "**Tests:** 3 tests (2 failed, 1 passed) and 8 subtests (4 failed)"
    assert said in summary.markdown(verdict.as_json(), "pkg", 1, "high")
    assert said in command_markdown(release, verdict, 1, "high")


def test_a_run_stopped_by_keyboard_interrupt_is_marked_and_not_green(tmp_path: Path) -> None:
    release = _ingest("1.0", _pytest_report(tmp_path, FORTY, stop="interrupt"))
    tests = release.test_results
    assert tests is not None
    assert (tests["passed"], tests["failed"], tests.get("interrupted")) == (5, 0, True)
    # The runner's nameless mark is not a test.
    assert TestCase.objects.filter(release=release).count() == 5
    assert not TestCase.objects.filter(name="").exists()
    verdict = judge_release(release).verdict
    partial = next(s for s in verdict.signals if s.name == "partial_test_run")
    assert "interrupted: only 5 tests ran before it stopped" in partial.detail
    assert verdict.severity != "low"


def test_a_run_stopped_by_x_is_judged_against_the_usual_number_of_tests(tmp_path: Path) -> None:
    full = _pytest_report(tmp_path / "full", FORTY)
    for version in ("1.0", "1.1", "1.2"):
        assert _ingest(version, full).test_results == {
            "passed": 40,
            "failed": 0,
            "skipped": 0,
            "flaky": 0,
            "failing_tests": [],
            "flaky_tests": [],
        }
    stopped = _ingest("1.3", _pytest_report(tmp_path / "x", FORTY, "-x", stop="fail"))
    assert stopped.test_results is not None
    assert "interrupted" not in stopped.test_results  # -x writes no mark of its own
    verdict = judge_release(stopped).verdict
    partial = next(s for s in verdict.signals if s.name == "partial_test_run")
    assert partial.detail.startswith(
        "6 of the usual 40 tests ran (the median of the last 3 releases): the run looks interrupted"
    )
    assert verdict_of(stopped).tests == (
        "6 tests (1 failed, 5 passed); 6 of the usual 40 tests ran (the median of the last 3 "
        "releases): the run looks interrupted"
    )
    # The next full run is not partial.
    again = _ingest("1.4", full)
    assert "partial_test_run" not in {s.name for s in judge_release(again).verdict.signals}
