"""Tests counted the way their tools write them: real reports of eight tools, ingested into a
release, give the counts their own tool asserts (`../shared/corpus/junit/expected.json`), and
pytest 9's reports give pytest's own summary (`../shared/corpus/pytest/expected.json`)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from releases.models import Release
from sources import services
from sources.models import Ingestion, TestCase
from sources.services import IngestError, Origin, ReleaseFields

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
# `../shared/corpus` beside the clone (CI), or beside a folder that holds worktrees.
CORPUS = next(
    (
        folder / "shared" / "corpus"
        for folder in ROOT.parents
        if (folder / "shared/corpus").is_dir()
    ),
    ROOT.parent / "shared" / "corpus",
)
JUNIT = json.loads((CORPUS / "junit" / "expected.json").read_text())
PYTEST = json.loads((CORPUS / "pytest" / "expected.json").read_text())
API = Origin("api")


def _release() -> Release:
    release, _ = services.upsert_release(ReleaseFields(version="v1"), API)
    return release


def _ingest(release: Release, path: Path) -> services.Ingested:
    with path.open("rb") as stream:
        return services.ingest_junit(release, stream, path.name, API)


def _results(release: Release) -> dict[str, Any]:
    release.refresh_from_db()
    assert release.test_results is not None
    return release.test_results


def test_the_corpus_holds_all_eighteen_reports() -> None:
    assert len(JUNIT) == 18
    assert len({case["file"] for case in JUNIT}) == 18


@pytest.mark.parametrize("case", JUNIT, ids=[case["file"] for case in JUNIT])
def test_a_real_report_gives_the_counts_its_tool_asserts(case: dict[str, Any]) -> None:
    release = _release()
    _ingest(release, CORPUS / "junit" / "files" / case["file"])
    tests = _results(release)
    counted = (tests["passed"], tests["failed"], tests["skipped"] + tests.get("xfailed", 0))
    assert counted == (case["passed"], case["failed"], case["skipped"])


@pytest.mark.parametrize("case", PYTEST, ids=[case["file"] for case in PYTEST])
def test_a_pytest_9_report_gives_pytests_own_summary(case: dict[str, Any]) -> None:
    release = _release()
    result = _ingest(release, CORPUS / "pytest" / case["file"])
    tests = _results(release)
    assert (tests["passed"], tests["failed"], tests["skipped"]) == (
        case["passed"],
        case["failed"],
        case["skipped"],
    )
    assert tests.get("xfailed", 0) == case["xfailed"]
    # The subtests pytest counted are in the header, not in any <testcase>: kept and said.
    assert tests.get("not_in_test_cases", 0) == case.get("subtests_passed", 0)
    assert result.counts["test_cases"] == case["testcases"]
    assert result.counts["header_tests"] == case["header_tests"]


def test_the_same_test_twice_in_one_report_is_two_invocations_and_a_later_report_reruns_them() -> (
    None
):
    release = _release()
    report = (
        b'<testsuite name="s"><testcase classname="c" name="t"><skipped/></testcase>'
        b'<testcase classname="c" name="t"><failure message="no">trace</failure></testcase>'
        b"</testsuite>"
    )
    services.ingest_junit(release, io.BytesIO(report), "one.xml", API)
    tests = _results(release)
    assert (tests["passed"], tests["failed"], tests["skipped"], tests["flaky"]) == (0, 1, 1, 0)
    rerun = b'<testsuite name="s"><testcase classname="c" name="t"/></testsuite>'
    services.ingest_junit(release, io.BytesIO(rerun), "two.xml", API)
    rows = list(
        TestCase.objects.order_by("invocation", "attempt").values_list(
            "invocation", "attempt", "status"
        )
    )
    assert rows == [(1, 1, "skipped"), (1, 2, "passed"), (2, 1, "failed")]


def test_a_failure_keeps_its_message_and_its_traceback() -> None:
    release = _release()
    report = (
        b'<testsuite name="pytest"><testcase classname="tests.test_timed" name="test_max_age">'
        b'<failure message="Failed: DID NOT RAISE SignatureExpired">def test_max_age():\n'
        b"&gt;       with pytest.raises(SignatureExpired):\n"
        b"E       Failed: DID NOT RAISE SignatureExpired\n\n"
        b"tests/test_timed.py:107: Failed</failure></testcase></testsuite>"
    )
    services.ingest_junit(release, io.BytesIO(report), "r.xml", API)
    row = TestCase.objects.get()
    assert row.failure_message == "Failed: DID NOT RAISE SignatureExpired"
    assert row.traceback.endswith("tests/test_timed.py:107: Failed")
    assert "> " in row.traceback


@pytest.mark.parametrize(
    "body",
    [
        b"<testsuite><testcase name='a'/><testcase name='b'></testsuite>",
        b'<!DOCTYPE x [<!ENTITY a "aaaa">]><testsuite><testcase name="&a;"/></testsuite>',
        b"<html><body/></html>",
        b"",
    ],
    ids=["malformed", "entity", "not-junit", "empty"],
)
def test_hostile_input_is_a_400_and_stores_nothing(body: bytes) -> None:
    release = _release()
    with pytest.raises(IngestError) as caught:
        services.ingest_junit(release, io.BytesIO(body), "bad.xml", API)
    assert caught.value.status == 400
    assert "bad.xml" in caught.value.message
    assert not TestCase.objects.exists()
    assert not Ingestion.objects.filter(kind="junit").exists()
