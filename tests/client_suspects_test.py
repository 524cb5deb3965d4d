"""Suspect commits for a release a CI job sends, for real: the client (`python -m
detective_client`, its own process) reads a git repository made here, in which a branch forked
mid-release breaks a function and is merged after another commit shifted that file's lines,
and sends it with a JUnit report to the live web server; the failure's first suspect, read
back through the drill-down API, is the breaking commit. The same whichever order the commits
and the report arrive in (one bundle; the report first, the range later)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from releases.models import Service
from sources import services as sources_services
from sources.models import CommitFile, ReleaseHead, TestCase
from tests.live_site import LiveSite
from tests.pipeline_test import client, git

pytestmark = pytest.mark.django_db(transaction=True)
API_KEY = "s" * 40

TIMED = (
    "def max_age_ok(age, max_age):\n    if age > max_age:\n        return False\n    return True\n"
)
TEST = (
    "from payments.timed import max_age_ok\n\n\n"
    "def test_max_age():\n    assert max_age_ok(11, 10) is False\n\n\n"
    "def test_young():\n    assert max_age_ok(1, 10) is True\n"
)


def repository(root: Path) -> tuple[Path, str]:
    """v1.0.0; a branch forked there breaks `max_age_ok`; main meanwhile adds a docstring on
    top of timed.py (the branch's line 2 is line 5 at the head); the branch merged: v1.1.0."""
    repo = root / "shop"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "payments").mkdir()
    (repo / "tests").mkdir()
    (repo / "payments" / "__init__.py").write_text("")
    (repo / "payments" / "timed.py").write_text(TIMED)
    (repo / "payments" / "cart.py").write_text("def total(items):\n    return sum(items)\n")
    (repo / "tests" / "test_timed.py").write_text(TEST)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "chore: initial")
    git(repo, "tag", "v1.0.0")
    git(repo, "switch", "-q", "-c", "grace")
    broken = TIMED.replace("age > max_age:", "age > max_age + 1:")
    (repo / "payments" / "timed.py").write_text(broken)
    git(repo, "commit", "-q", "-am", "Add a second of grace to max_age")
    culprit = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "main")
    (repo / "payments" / "timed.py").write_text('"""Ages of tokens."""\n\n\n' + TIMED)
    git(repo, "commit", "-q", "-am", "docs(timed): say what the module is")
    (repo / "payments" / "cart.py").write_text("def total(items):\n    return sum(items, 0)\n")
    git(repo, "commit", "-q", "-am", "fix(cart): an empty cart totals 0")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge grace", "grace")
    git(repo, "tag", "v1.1.0")
    assert "max_age + 1" in (repo / "payments" / "timed.py").read_text().splitlines()[4]
    return repo, culprit


# pytest's long traceback for the failure, paths as a CI runner has them: the test's frame
# only ("assert True is False"), so the suspect is found by what the test imports.
REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="2">
<testcase classname="tests.test_timed" name="test_max_age" time="0.01">
<failure message="assert True is False&#10; +  where True = max_age_ok(11, 10)">def test_max_age():
&gt;       assert max_age_ok(11, 10) is False
E       assert True is False
E        +  where True = max_age_ok(11, 10)

/home/runner/work/shop/shop/tests/test_timed.py:5: AssertionError</failure></testcase>
<testcase classname="tests.test_timed" name="test_young" time="0.01"/>
</testsuite></testsuites>
"""


def suspects(site: LiveSite, version: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{site.url}/api/releases/{version}/suspects",
        params={"test": "test_max_age", "service": "shop"},
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_client_sends_what_ranks_the_culprit_first_in_any_order(tmp_path: Path) -> None:
    repo, culprit = repository(tmp_path)
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    shop = Service.objects.create(name="Shop", slug="shop")
    _, token = sources_services.create_token("CI of shop", shop)
    git_args = ("--git-repo", str(repo), "--git-range", "v1.0.0..v1.1.0")
    with LiveSite(tmp_path / "logs", {"DETECTIVE_API_TOKEN": API_KEY}, workers=0) as site:
        # One bundle: the range and the report together.
        sent = client(
            site, token, "ingest", "1.1.0", "--service", "shop", *git_args, "--junit", str(report)
        )
        assert sent.returncode == 0, sent.stderr + site.log_text()
        together = suspects(site, "1.1.0")
        assert together["computed"] is True
        ranked = [s["sha"] for s in together["suspects"]]
        assert ranked[0] == culprit, together
        top = together["suspects"][0]
        assert (top["tier"], top["path"]) == ("code under test", "payments/timed.py")
        # Blame at the head placed the branch's line where it stands after the docstring.
        assert {"path": "payments/timed.py", "start": 5, "end": 5, "deleted": False} in top[
            "changed_lines_at_head"
        ]
        assert culprit[:7] in together["summary"]
        # The small profile's read of the summary (`?view=brief`) names the first suspect.
        brief = httpx.get(
            f"{site.url}/api/releases/1.1.0/summary",
            params={"view": "brief", "service": "shop"},
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=30,
        )
        assert brief.status_code == 200, brief.text
        [said] = brief.json()["suspects"]
        assert said.startswith("test_max_age fails; first suspect") and culprit[:9] in said
        # What the server kept: hunks per commit file, and the head's facts.
        stored = CommitFile.objects.get(commit__sha=culprit, path="payments/timed.py")
        assert stored.hunks == [[2, 1, 2, 1]]
        head = ReleaseHead.objects.get(release__version="1.1.0")
        assert head.tests["tests/test_timed.py"] == [
            # The import graph's edges (the module, its package's __init__), then the names
            # as written.
            "/payments/timed.py",
            "/payments/__init__.py",
            "payments.timed",
            "payments.timed.max_age_ok",
            "call:max_age_ok@5",  # the calls the test file makes, with their lines
            "call:max_age_ok@9",
        ]
        assert head.sha == git(repo, "rev-parse", "v1.1.0")

        # The same bundle again stores nothing new and ranks the same.
        again = client(
            site, token, "ingest", "1.1.0", "--service", "shop", *git_args, "--junit", str(report)
        )
        assert again.returncode == 0, again.stderr
        assert "already stored" in again.stderr
        assert [s["sha"] for s in suspects(site, "1.1.0")["suspects"]] == ranked

        # The report first (no suspects yet: no changed lines), the range later.
        first = client(site, token, "ingest", "1.2.0", "--service", "shop", "--junit", str(report))
        assert first.returncode == 0, first.stderr
        assert suspects(site, "1.2.0")["computed"] is False
        later = client(site, token, "ingest", "1.2.0", "--service", "shop", *git_args)
        assert later.returncode == 0, later.stderr
        assert [s["sha"] for s in suspects(site, "1.2.0")["suspects"]] == ranked
    assert TestCase.objects.get(release__version="1.2.0", name="test_young").suspects is None
