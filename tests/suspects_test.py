"""End to end: a git repository made here in which one commit breaks a function, a JUnit report
with that failure's pytest traceback, through `manage.py ingest --git-repo`: the failure's stored
suspects, the policy's evidence sentence, and its critical-area raise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from detective_client.summary import markdown
from releases.release_verdict import suspects_said
from releases.views_test import viewer_with_view_permissions
from sources.history import read_history
from sources.judging import judge_release
from sources.models import CommitFile, TestCase
from tests.ingest_test import git, ingest

pytestmark = pytest.mark.django_db

TIMED = (
    "def max_age_ok(age, max_age):\n    if age > max_age:\n        return False\n    return True\n"
)
BROKEN = TIMED.replace("age > max_age:", "age > max_age + 1:")
TEST = (
    "from payments.timed import max_age_ok\n\n\n"
    "def test_max_age():\n    assert max_age_ok(11, 10) is False\n"
)


def make_repository(repo: Path) -> None:
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "payments").mkdir()
    (repo / "tests").mkdir()
    (repo / "payments" / "__init__.py").write_text("")
    (repo / "payments" / "timed.py").write_text(TIMED)
    (repo / "tests" / "test_timed.py").write_text(TEST)
    (repo / "README.md").write_text("shop\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "chore: initial")
    git(repo, "tag", "v1.0.0")
    (repo / "README.md").write_text("shop, with docs\n")
    git(repo, "commit", "-q", "-am", "docs: say what the shop is")
    (repo / "payments" / "timed.py").write_text(BROKEN)
    git(repo, "commit", "-q", "-am", "Add a second of grace to max_age")
    git(repo, "tag", "v1.1.0")


# What pytest 9 writes for the failure above (long style), paths as a CI runner has them.
REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="2">
<testcase classname="tests.test_timed" name="test_max_age" file="tests/test_timed.py" time="0.01">
<failure message="assert True is False">def test_max_age():
&gt;       assert max_age_ok(11, 10) is False
E       assert True is False
E        +  where True = max_age_ok(11, 10)

/home/runner/work/shop/shop/tests/test_timed.py:5: AssertionError</failure></testcase>
<testcase classname="tests.test_timed" name="test_other" file="tests/test_timed.py" time="0.01"/>
</testsuite></testsuites>
"""


API_KEY = "k" * 40


def test_a_breaking_commit_is_the_failures_first_suspect_and_the_evidence_says_so(
    tmp_path: Path, settings: Any
) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    repo = tmp_path / "shop"
    make_repository(repo)
    culprit = git(repo, "rev-parse", "v1.1.0")
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    out = ingest(
        "v1.1.0", "--service", "checkout", "--git-repo", str(repo),
        "--git-range", "v1.0.0..v1.1.0", "--junit", str(report),
    )  # fmt: skip
    assert "failures with suspects" in out

    failed = TestCase.objects.get(name="test_max_age")
    assert [s["sha"] for s in failed.suspects["ranked"]] == [culprit]
    top = failed.suspects["ranked"][0]
    assert top["tier"] == "code under test"
    assert top["path"] == "payments/timed.py"
    assert top["author"] == "Ada Lovelace"
    # The failure's frames (the runner's prefix gone) and the culprit's changed line at the head.
    assert failed.suspects["frames"] == [
        {"path": "tests/test_timed.py", "line": 5, "function": "test_max_age", "in_repo": True}
    ]
    assert failed.suspects["lines"] == {culprit: [["payments/timed.py", 2, 2, False]]}
    assert TestCase.objects.get(name="test_other").suspects is None
    # The range's hunks are kept as the CI client sends them (a later report is ranked from
    # them), and the history says the failure's suspects were computed: its evidence of an
    # area is then its suspect's path (risk/policy.py), never its name.
    assert CommitFile.objects.get(commit__sha=culprit, path="payments/timed.py").hunks == [
        [2, 1, 2, 1]
    ]
    past = read_history(failed.release)
    [failing] = past.failing()
    assert failing.label == "tests.test_timed::test_max_age" and failing.suspects_computed

    verdict = judge_release(failed.release).verdict
    evidence = verdict.evidence()
    said = [s for s in evidence if "first suspect" in s]
    assert said and culprit[:7] in said[0] and "'Add a second of grace to max_age'" in said[0]
    # payments/ is a critical area: the suspect's path raises the verdict.
    raised = [s.name for s in verdict.raised()]
    assert "suspect_in_critical_area" in raised
    assert verdict.severity == "high"

    # The Test cases tab shows the suspect beside the traceback, linked to the commit alone.
    client = Client()
    client.force_login(viewer_with_view_permissions())
    page = client.get(failed.release.get_absolute_url(), {"tab": "tests"}).content.decode()
    assert "Suspect commits" in page
    assert f"sha={culprit}" in page and "Add a second of grace to max_age" in page
    commits = client.get(
        failed.release.get_absolute_url(), {"tab": "commits", "sha": culprit}
    ).content.decode()
    listed = commits.split('class="src-commits"', 1)[1]
    assert "Add a second of grace to max_age" in listed
    assert "say what the shop is" not in listed
    everything = client.get(failed.release.get_absolute_url(), {"tab": "commits"})
    assert "say what the shop is" in everything.content.decode().split('class="src-commits"')[1]

    # The drill-down the agent's get_failure_suspects reads: frames, ranking, changed lines.
    api = Client().get(
        "/api/releases/v1.1.0/suspects",
        {"test": "test_max_age", "service": "checkout"},
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert api.status_code == 200, api.content
    body = api.json()
    assert body["computed"] is True and body["test"] == "tests.test_timed::test_max_age"
    assert body["frames"][0]["path"] == "tests/test_timed.py"
    assert [(s["rank"], s["sha"]) for s in body["suspects"]] == [(1, culprit)]
    assert body["suspects"][0]["changed_lines_at_head"] == [
        {"path": "payments/timed.py", "start": 2, "end": 2, "deleted": False}
    ]
    assert body["summary"] in evidence  # the policy's own sentence
    missing = Client().get(
        "/api/releases/v1.1.0/suspects",
        {"test": "test_other", "service": "checkout"},
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert missing.status_code == 404  # it passed: no failed test by that name

    # The verdict JSON carries the policy's sentence (as a filed report stores its signals) and
    # the Markdown for CI names the top suspect.
    told = suspects_said([signal.as_dict() for signal in verdict.signals])
    assert told == (body["summary"],)
    text = markdown(
        {"version": "v1.1.0", "severity": "high", "suspects": list(told)}, "checkout", 1, "high"
    )
    assert "New failures and their first suspect commits:" in text
    line = next(line for line in text.splitlines() if culprit[:7] in line)
    assert line.startswith(f"   - `test_max_age`: `{culprit[:9]}` ")
