"""End to end: a real git repository made here with the `git` command (tags, a merge, a rename,
a binary file), JUnit XML written by pytest itself and by Surefire (kept sample), an OpenMetrics
file and a real Prometheus, through `manage.py ingest`; then the summary the agent reads. And the
command's refusals: a ref that does not exist, an empty range, a malformed report, each storing
nothing."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from releases import selectors
from releases.models import Release
from sources.models import Commit, CommitFile, Ingestion, MetricSample, TestCase
from sources.parsers.junit_test import pytest_report
from tests import prometheus_test

pytestmark = pytest.mark.django_db

ASSETS = Path(__file__).resolve().parent / "assets" / "junit"


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada Lovelace",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GIT_COMMITTER_NAME": "Ada Lovelace",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_SYSTEM": os.devnull,
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def make_repository(repo: Path) -> None:
    """v1.0.0, then on a branch a payments feature with a binary logo, on main a rename and a
    breaking auth change, merged; tagged v1.1.0."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.py").write_text("def main():\n    return 1\n")
    (repo / "auth.py").write_text("TOKEN_TTL = 3600\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "chore: initial")
    git(repo, "tag", "v1.0.0")
    git(repo, "checkout", "-q", "-b", "payments")
    (repo / "payments.py").write_text("def charge(cents):\n    return cents\n" * 3)
    (repo / "logo.png").write_bytes(bytes(range(256)) * 4)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "feat(payments): charge cards")
    git(repo, "checkout", "-q", "main")
    git(repo, "mv", "app.py", "server.py")
    git(repo, "commit", "-q", "-m", "refactor: rename app to server")
    (repo / "auth.py").write_text("TOKEN_TTL = 60\n")
    git(repo, "commit", "-q", "-am", "fix(auth)!: expire tokens after a minute")
    git(repo, "merge", "-q", "--no-ff", "payments", "-m", "Merge branch 'payments'")
    git(repo, "tag", "v1.1.0")


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "shop"
    make_repository(repo)
    return repo


def ingest(*args: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("ingest", *args, stdout=out)
    return out.getvalue()


def test_git_two_junit_reports_and_metrics_end_in_the_summary_the_agent_reads(
    repository: Path, tmp_path: Path, start_prometheus: Callable[[str], str]
) -> None:
    url = start_prometheus(prometheus_test.SERIES)
    (tmp_path / "py").mkdir()
    pytest_xml = pytest_report(tmp_path / "py", "xunit2")
    metrics = tmp_path / "release.om"
    metrics.write_text(
        "# TYPE detective_error_rate gauge\n"
        "detective_error_rate 0.01 1763632800\n"
        "# TYPE detective_response_time_p95_ms gauge\n"
        "detective_response_time_p95_ms 420 1763632800\n"
        "# EOF\n"
    )
    previous_deploy = prometheus_test.PREVIOUS_DEPLOY.isoformat()
    ingest("v1.0.0", "--service", "checkout", "--deployed-at", previous_deploy)
    output = ingest(
        "v1.1.0",
        "--service",
        "checkout",
        "--environment",
        "production",
        "--deployed-at",
        prometheus_test.DEPLOY.isoformat(),
        "--git-repo",
        str(repository),
        "--git-range",
        "v1.0.0..v1.1.0",
        "--junit",
        str(pytest_xml),
        str(ASSETS / "TEST-com.example.checkout.PaymentServiceTest.xml"),
        "--prometheus",
        url,
    )
    assert "git v1.0.0..v1.1.0: stored" in output

    release = Release.objects.get(service__slug="checkout", version="v1.1.0")
    assert (release.git_from_ref, release.git_to_ref) == ("v1.0.0", "v1.1.0")
    assert release.head_sha == git(repository, "rev-parse", "v1.1.0")
    # Git: four commits (one a merge), the rename and the binary file as they are.
    assert Commit.objects.filter(release=release).count() == 4
    rename = CommitFile.objects.get(commit__release=release, path="server.py")
    assert rename.old_path == "app.py"
    logo = CommitFile.objects.get(commit__release=release, path="logo.png")
    assert logo.binary and logo.added is None
    assert release.changes is not None
    assert len(release.changes) == 3  # the merge is not a change of its own
    assert any(line.startswith("fix(auth)!: expire tokens") for line in release.changes)

    # Tests: pytest's 6 + Surefire's 5 tests, by their last attempt.
    tests = release.test_results
    assert tests is not None
    assert tests["passed"] == 3 + 2 and tests["skipped"] == 1 + 1
    assert tests["failed"] == 2 + 2 and tests["flaky"] == 1
    assert "test_shop::test_refund_is_partial" in tests["failing_tests"]
    assert "com.example.checkout.PaymentServiceTest::refundsPartially" in tests["failing_tests"]

    # Metrics from the real Prometheus: the release's window and the previous release's.
    figures = release.deployment_metrics
    assert figures is not None
    assert figures["error_rate"] == pytest.approx(4 / 104, rel=0.05)
    assert figures["error_rate_baseline"] == pytest.approx(1 / 101, rel=0.05)
    assert figures["response_time_p95"] > figures["response_time_p95_baseline"] > 0

    # The summary through the agent's own endpoint: what the model reads.
    assert release.as_summary()["tests"] == tests
    response = Client().get(release.get_absolute_url(), follow=False)
    assert response.status_code in (200, 302)

    # The same command again counts nothing twice; a metrics file as baseline replaces nothing.
    again = ingest(
        "v1.1.0",
        "--service",
        "checkout",
        "--git-repo",
        str(repository),
        "--git-range",
        "v1.0.0..v1.1.0",
        "--junit",
        str(pytest_xml),
        "--metrics-file",
        str(metrics),
        # Stamped a year before the deploy: outside both windows, so it is named one.
        "--window",
        "release",
    )
    assert "git v1.0.0..v1.1.0: already ingested, counted once" in again
    assert f"junit {pytest_xml.name}: already ingested, counted once" in again
    assert TestCase.objects.filter(release=release).count() == 6 + 8
    release.refresh_from_db()
    # The file's samples are in the release window too: its gauge now counts beside Prometheus'.
    assert MetricSample.objects.filter(release=release, name="detective_error_rate").exists()


def test_a_default_service_release_keeps_its_short_address(repository: Path) -> None:
    ingest("v1.1.0", "--git-repo", str(repository), "--git-range", "v1.0.0..v1.1.0")
    release = selectors.find_release("v1.1.0")
    assert release is not None and release.get_absolute_url() == "/releases/v1.1.0/"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--git-range", "v1.0.0..v9.9.9"], "'v9.9.9' does not exist"),
        (["--git-range", "v1.1.0..v1.0.0"], "git:"),
        (["--junit", str(ASSETS / "missing.xml")], "no such file"),
    ],
    ids=["unknown-ref", "empty-range", "missing-file"],
)
def test_a_refusal_stores_nothing(repository: Path, args: list[str], problem: str) -> None:
    if "--git-range" in args:
        args = ["--git-repo", str(repository), *args]
    with pytest.raises(CommandError, match=problem):
        ingest("v2.0.0", *args)
    assert not Release.objects.filter(version="v2.0.0").exists()
    assert not Ingestion.objects.exists()


def test_a_malformed_second_report_leaves_nothing_of_the_first(tmp_path: Path) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_text('<testsuite>\n<testcase name="a">\n</testsuite>\n')
    with pytest.raises(CommandError, match=r"broken\.xml, line 3: malformed XML"):
        ingest("v2.0.0", "--junit", str(ASSETS / "jest-junit.xml"), str(broken))
    assert not TestCase.objects.exists()
    assert not Release.objects.filter(version="v2.0.0").exists()


def test_a_prometheus_that_does_not_answer_is_a_command_error() -> None:
    from tests.prometheus_server import free_port

    deployed = (prometheus_test.DEPLOY + timedelta(days=1)).isoformat()
    with pytest.raises(CommandError, match="Prometheus"):
        ingest(
            "v3.0.0",
            "--deployed-at",
            deployed,
            "--prometheus",
            f"http://127.0.0.1:{free_port()}",
            "--prometheus-timeout",
            "2",
        )
    assert not Release.objects.filter(version="v3.0.0").exists()


@pytest.mark.parametrize(
    "form",
    ["repeated", "after-one-flag", "folder"],
)
def test_every_form_of_giving_several_reports_keeps_them_all(tmp_path: Path, form: str) -> None:
    # Before: `--junit A --junit B` kept only B, silently.
    surefire = ASSETS / "TEST-com.example.checkout.PaymentServiceTest.xml"
    jest = ASSETS / "jest-junit.xml"
    if form == "repeated":
        args = ["--junit", str(surefire), "--junit", str(jest)]
    elif form == "after-one-flag":
        args = ["--junit", str(surefire), str(jest)]
    else:
        folder = tmp_path / "reports"
        (folder / "e2e").mkdir(parents=True)
        (folder / surefire.name).write_bytes(surefire.read_bytes())
        (folder / "e2e" / jest.name).write_bytes(jest.read_bytes())
        args = ["--junit", str(folder)]
    ingest("v4.0.0", *args)
    release = Release.objects.get(version="v4.0.0")
    assert release.ingestions.filter(kind="junit").count() == 2
    # As test_junit_reports_fill_the_summary_and_the_same_report_counts_once counts them.
    tests = release.test_results
    assert (tests["passed"], tests["failed"], tests["skipped"]) == (5, 3, 2)


def test_a_folder_without_reports_is_a_command_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"no \*\.xml file"):
        ingest("v4.0.0", "--junit", str(tmp_path))
    assert not Release.objects.filter(version="v4.0.0").exists()


IDNA_LIKE_HEADER = (
    "# This file is automatically generated by tools/make-tables.py\n"
    "# vim: set fileencoding=utf-8 :\n\n"
)


def _table(rows: int, start: int = 0) -> str:
    body = "".join(f"    (0x{n:04x}, 'V'),\n" for n in range(start, start + rows))
    return f"{IDNA_LIKE_HEADER}_seg = [\n{body}]\n"


def test_a_commit_touching_only_a_generated_file_is_no_change_size(tmp_path: Path) -> None:
    """idna's shape: a Unicode update regenerates thousands of lines of tables, nothing else;
    the tables are said apart as generated, and the change has no size. A public API file
    deleted in the next release is a breaking change naming the file and its commit."""
    from sources.drilldown.changes import code_changes
    from sources.drilldown.paging import PageBounds
    from sources.judging import judge_release

    repo = tmp_path / "idna"
    (repo / "idna").mkdir(parents=True)
    (repo / "api").mkdir()
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    (repo / "idna" / "core.py").write_text("def encode(s):\n    return s\n")
    (repo / "idna" / "uts46data.py").write_text(_table(200))
    (repo / "api" / "codec.py").write_text("from idna.core import encode\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "First release")
    git(repo, "tag", "v3.9")
    # Over the 4,000 lines a service without a history of its own is large from.
    (repo / "idna" / "uts46data.py").write_text(_table(5000, start=3))
    git(repo, "commit", "-q", "-am", "Update to Unicode 16.0.0")
    git(repo, "tag", "v3.10")
    git(repo, "rm", "-q", "api/codec.py")
    git(repo, "commit", "-q", "-m", "Drop the codec module")
    dropped = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "v3.11")

    ingest("v3.9", "--service", "idna", "--git-repo", str(repo), "--git-range", "v3.9")
    ingest("v3.10", "--service", "idna", "--git-repo", str(repo), "--git-range", "v3.9..v3.10")
    release = Release.objects.get(service__slug="idna", version="v3.10")
    [tables] = CommitFile.objects.filter(commit__release=release)
    assert tables.path == "idna/uts46data.py" and tables.generated and tables.added > 3000

    # The agent's drill-down says it too.
    shown = code_changes(release, path_prefix="", area="", page=PageBounds(limit=10, offset=0))
    assert shown["commits"][0]["files"][0]["generated"] is True

    signals = {s.name: s for s in judge_release(release).verdict.signals}
    size = signals["change_size"]
    assert size.level == "none" and size.figure == 0
    assert "in vendored or generated files" in size.detail
    # Without the reader's flag (an older client's record) the tables were code, and large.
    CommitFile.objects.filter(pk=tables.pk).update(generated=False)
    unflagged = {s.name: s for s in judge_release(release).verdict.signals}["change_size"]
    assert unflagged.level == "medium" and unflagged.figure == tables.added + tables.deleted

    ingest("v3.11", "--service", "idna", "--git-repo", str(repo), "--git-range", "v3.10..v3.11")
    later = Release.objects.get(service__slug="idna", version="v3.11")
    assert CommitFile.objects.get(commit__release=later, path="api/codec.py").removed
    breaking = {s.name: s for s in judge_release(later).verdict.signals}["breaking_change"]
    assert f'api/codec.py (deleted in the commit {dropped[:7]} "Drop the codec module")' in (
        breaking.detail
    )
