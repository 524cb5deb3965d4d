"""`manage.py backtest` on a small git repository made here: releases from tags, the policy's
verdict on each, the totals, a rebuild, and nothing stored."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from releases.models import Release, Service
from sources.backtest import release_tags, replay
from sources.judging import judge_release

pytestmark = pytest.mark.django_db

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="payments" tests="3">
<testcase classname="tests.payments.test_gateway" name="test_charge">{failure}</testcase>
<testcase classname="tests.payments.test_gateway" name="test_refund"/>
<testcase classname="tests.catalog.test_search" name="test_sorting"/>
</testsuite></testsuites>
"""


def _git(repo: Path, *args: str, when: int = 0) -> None:
    stamp = f"{1_700_000_000 + when * 3600} +0000"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


def _commit(repo: Path, path: str, text: str, message: str, when: int) -> None:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    _git(repo, "add", "-A", when=when)
    _git(repo, "commit", "-q", "-m", message, when=when)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """v1.0.0, v1.1.0 (a change to the docs), v1.1.1 on v1.1.0's commit (a rebuild),
    v1.2.0 (the payment gateway), and v1.10.0 (after v1.2.0 in version order)."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _commit(root, "src/app.py", "print('hello')\n", "Initial commit", 0)
    _git(root, "tag", "v1.0.0")
    _commit(root, "docs/index.md", "# Docs\n", "docs: an index page", 1)
    _git(root, "tag", "v1.1.0")
    _git(root, "tag", "v1.1.1")
    _commit(root, "src/payments/gateway.py", "RETRIES = 3\n", "Retry the gateway", 2)
    _git(root, "tag", "v1.2.0")
    _commit(root, "src/catalog/search.py", "ORDER = 'name'\n", "Sort by name", 3)
    _git(root, "tag", "v1.10.0")
    _git(root, "tag", "not-a-release")
    return root


def test_tags_are_in_version_order_and_filtered_by_the_glob(repo: Path) -> None:
    names = [tag.name for tag in release_tags(repo, "v*")]
    assert names == ["v1.0.0", "v1.1.0", "v1.1.1", "v1.2.0", "v1.10.0"]
    assert [t.name for t in release_tags(repo, "v*", last=2)] == ["v1.1.1", "v1.2.0", "v1.10.0"]


def test_each_release_is_judged_and_nothing_is_stored(repo: Path, tmp_path: Path) -> None:
    junit = tmp_path / "junit"
    junit.mkdir()
    (junit / "v1.1.0.xml").write_text(JUNIT.format(failure=""))
    (junit / "v1.1.1.xml").write_text(JUNIT.format(failure=""))
    (junit / "v1.2.0.xml").write_text(JUNIT.format(failure='<failure message="boom"/>'))
    out, json_file, md_file = StringIO(), tmp_path / "b.json", tmp_path / "b.md"
    releases_before = Release.objects.count()

    call_command(
        "backtest",
        service="shop",
        git_repo=repo,
        tags="v*",
        junit_dir=junit,
        json=json_file,
        markdown=md_file,
        stdout=out,
    )

    result = json.loads(json_file.read_text())
    rows = {row["version"]: row for row in result["releases"]}
    assert list(rows) == ["v1.1.0", "v1.1.1", "v1.2.0", "v1.10.0"]
    assert rows["v1.1.0"]["commits"] == 1 and rows["v1.1.0"]["severity"] == "low"
    # The rebuild does not crash the replay: a release with no commits, said so.
    assert rows["v1.1.1"]["commits"] == 0
    assert rows["v1.1.1"]["notes"] == ["a rebuild: v1.1.1 is the commit of v1.1.0"]
    # A failing payment test where it passed before: high, for the failure's own reasons.
    assert rows["v1.2.0"]["severity"] == "high"
    raised = {s["name"] for s in rows["v1.2.0"]["raised_by"]}
    assert "critical_area_failures" in raised
    assert any("test_charge" in s["detail"] for s in rows["v1.2.0"]["raised_by"])
    # JUnit was given, but not for v1.10.0: its results are missing, as the policy says.
    assert rows["v1.10.0"]["severity"] == rows["v1.10.0"]["policy_severity"] == "medium"
    assert [s["name"] for s in rows["v1.10.0"]["raised_by"]] == ["missing_tests"]
    # No metrics were given at all: their "missing" signals are left out, and said so.
    assert rows["v1.1.0"]["policy_severity"] == "medium"
    totals = result["totals"]
    assert totals["releases"] == 4
    assert sum(totals["severity"].values()) == 4 and totals["severity"]["high"] == 1
    assert totals["signals_raising"]["critical_area_failures"] == 1
    assert "metrics (no --metrics-dir)" in result["not_given"]
    printed = out.getvalue()
    assert "v1.1.1..v1.2.0" in printed and "HIGH" in printed
    assert "4 releases of shop under policy version" in printed
    assert "| v1.2.0 | v1.1.1..v1.2.0 | 1 | high |" in md_file.read_text()
    # A scratch database: not one release, service or row outlives the replay.
    assert Release.objects.count() == releases_before
    assert not Service.objects.filter(name__contains="shop").exists()


def test_keep_stores_the_replay_in_the_service(repo: Path) -> None:
    tags = release_tags(repo, "v*")
    result = replay("shop", repo, tags, keep=True)
    assert len(result.rows) == 4
    assert sorted(
        Release.objects.filter(service__name="shop").values_list("version", flat=True)
    ) == [
        "v1.1.0",
        "v1.1.1",
        "v1.10.0",
        "v1.2.0",
    ]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"tags": "nothing*"}, "0 tags matched"),
        ({"tags": "v1.0.0"}, "1 tag matched"),
        ({"git_repo": Path("/nonexistent/repo")}, "is not a folder"),
        ({"junit_dir": Path("/nonexistent/junit")}, "is not a folder"),
    ],
)
def test_bad_input_is_a_command_error_that_stores_nothing(
    repo: Path, options: dict[str, object], says: str
) -> None:
    arguments = {"service": "shop", "git_repo": repo, "tags": "v*", **options}
    with pytest.raises(CommandError, match=says):
        call_command("backtest", stdout=StringIO(), **arguments)
    assert not Release.objects.filter(service__name__contains="shop").exists()


def test_a_folder_that_is_not_a_checkout_is_a_command_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="not a git repository"):
        call_command("backtest", service="shop", git_repo=tmp_path, stdout=StringIO())


def _suite(status: str) -> str:
    inner = "<skipped/>" if status == "skipped" else ""
    cases = "".join(
        f'<testcase classname="tests.payments.test_gateway" name="test_{n}">{inner}</testcase>'
        for n in range(6)
    )
    return f'<testsuites><testsuite name="payments" tests="6">{cases}</testsuite></testsuites>'


def test_a_payment_suite_newly_skipped_is_said_through_the_ingested_history(
    repo: Path, tmp_path: Path
) -> None:
    junit = tmp_path / "junit"
    junit.mkdir()
    for tag, status in (("v1.1.0", "passed"), ("v1.1.1", "passed"), ("v1.2.0", "skipped")):
        (junit / f"{tag}.xml").write_text(_suite(status))
    result = replay("shop", repo, release_tags(repo, "v*", last=3), junit_dir=junit)
    row = next(r for r in result.rows if r.version == "v1.2.0")
    said = next(s for s in row.raised if s.name == "newly_skipped")
    assert said.level == "medium"
    assert said.detail.startswith("6 tests of payments newly skipped")


def test_usage_errors_exit_64_in_one_line_without_a_traceback(tmp_path: Path) -> None:
    """Issue 37: as the CI client's codes; a usage error read from the command line is 64."""
    for arguments in (["backtest", "--bogus"], ["verdict", "--bogus"], ["verdict", "v1", "--x"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *arguments],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            check=False,
        )
        assert done.returncode == 64, (arguments, done.stderr)
        assert "Traceback" not in done.stderr and "Error: " in done.stderr


def test_json_into_a_missing_folder_is_written_and_an_unknown_service_is_said(
    repo: Path, tmp_path: Path
) -> None:
    target = tmp_path / "new" / "folder" / "b.json"
    err = StringIO()
    call_command(
        "backtest", service="nosuch", git_repo=repo, tags="v*", json=target,
        stdout=StringIO(), stderr=err,
    )  # fmt: skip
    assert json.loads(target.read_text())["totals"]["releases"] == 4
    assert "no service 'nosuch' in Detective yet" in err.getvalue()
    (tmp_path / "file").write_text("")
    with pytest.raises(CommandError, match="Cannot write --json") as refused:
        call_command(
            "backtest", service="shop", git_repo=repo, json=tmp_path / "file" / "b.json",
            stdout=StringIO(),
        )  # fmt: skip
    assert refused.value.returncode == 64


def _size_said(release: Release) -> tuple[str, str]:
    signal = next(s for s in judge_release(release).verdict.signals if s.name == "change_size")
    return signal.level, signal.detail


def test_the_live_path_and_the_backtest_say_the_same_size_of_the_same_release(
    tmp_path: Path,
) -> None:
    """Twelve releases: ten small ones, one of 700 lines among them, then 611 lines (the shape
    of itsdangerous 2.2.0). Each release ingested as CI does (`manage.py ingest`) is judged as
    the backtest over all tags judges it; and a service that started with the last two
    releases (too few to judge its size against) says what the full history says of 611."""
    root = tmp_path / "sized"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _commit(root, "src/lib/core.py", "X = 0\n", "start", 0)
    _git(root, "tag", "v1.0")
    sizes = [12, 700, 20, 7, 30, 15, 9, 40, 11, 25, 8, 611]
    for index, lines in enumerate(sizes, 1):
        body = "".join(f"V{index}_{n} = {n}\n" for n in range(lines))
        _commit(root, f"src/lib/part{index}.py", body, f"part {index}", index)
        _git(root, "tag", f"v1.{index}")
    tags = release_tags(root, "v*")
    replay("replayed", root, tags, keep=True)
    for before, tag in itertools.pairwise(tags):
        call_command(
            "ingest", tag.name, service="live", git_repo=root,
            git_range=f"{before.name}..{tag.name}", stdout=StringIO(),
        )  # fmt: skip
    said = {}
    for tag in tags[1:]:
        replayed = Release.objects.get(service__name="replayed", version=tag.name)
        live = Release.objects.get(service__name="live", version=tag.name)
        said[tag.name] = _size_said(live)
        assert said[tag.name] == _size_said(replayed), tag.name
    # 700 lines with one small release before: the young-service rule, said at no level.
    assert said["v1.2"][0] == "none"
    # 611 after ten releases of its own, 700 among them: usual for this service.
    assert said["v1.12"][0] == "none"
    assert "above the largest of the service's last 10 releases" not in said["v1.12"][1]
    # A service whose first stored releases are the last three: the young-service rule, and
    # the same level for 611 lines.
    for before, tag in itertools.pairwise(tags[-3:]):
        call_command(
            "ingest", tag.name, service="late", git_repo=root,
            git_range=f"{before.name}..{tag.name}", stdout=StringIO(),
        )  # fmt: skip
    late = _size_said(Release.objects.get(service__name="late", version="v1.12"))
    assert late[0] == said["v1.12"][0] == "none"
    assert late[1].endswith("(entropy 0.00 of 1)")  # nothing said of its size
