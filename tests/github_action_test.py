"""The composite GitHub Action (.github/actions/detective/action.yml) run as GitHub runs it
(tests/github_action.py): against the live site it installs the client, sends a release from a
git repository with its JUnit XML, has it assessed by the worker against the scripted model,
and exits with the verdict's code, its summary in the job's; with Detective stopped it still
writes a job summary that says so, and exits 3. A clean first release sent with a metrics file
and its deploy time (`deployed-at`) passes at once: exit 0, no person asked (issue 37, item 2);
without one the deploy time is the job's start, and the summary says so."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from detective_client import verdict as gate
from releases.models import Release, Service
from releases.selectors import release_verdict
from sources import services as sources_services
from sources.models import TestCase
from tests.github_action import run_action
from tests.live_site import LiveSite
from tests.llm_server import ScriptedLLM
from tests.pipeline_test import checkout, git, junit_reports

PROJECT = Path(__file__).resolve().parents[1]
ACTION = PROJECT / ".github" / "actions" / "detective"


def runner_environment() -> dict[str, str]:
    """What a runner's shell has (this machine's, for its uv, certificates and proxy), less
    this project's own virtual environment and Django settings."""
    environment = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL"):
        environment.pop(name, None)
    return environment


def test_with_detective_stopped_the_job_summary_says_so_and_exits_3(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    done = run_action(
        ACTION,
        {"url": url, "token": "dtk_anything", "service": "shop", "version": "1.1.0",
         "wait": "1"},
        tmp_path,
        runner_environment(),
    )  # fmt: skip
    assert done.exit_code == 3, "\n".join(done.logs)
    assert done.outputs["verdict"]["exit-code"] == "3"
    assert done.outputs["ingest"]["exit-code"] == "1"
    assert done.summary.startswith("### ❔ Detective: shop 1.1.0: No verdict")
    assert f"**What to do:** Detective did not answer at {url}" in done.summary
    assert "**Sending the release failed (exit 1)**" in done.summary
    assert f"cannot reach Detective at {url}/" in done.summary
    # No `deployed-at`: the job's start time, and the summary says that is what it is.
    started = done.outputs["install"]["started-at"]
    assert datetime.fromisoformat(started).tzinfo is not None
    assert done.outputs["ingest"]["deployed-at"] == started
    assert f"- **Deploy time:** {started}, this job's start time (no `deployed-at` given)" in (
        done.summary
    )


@pytest.mark.django_db(transaction=True)
def test_the_action_sends_the_release_and_exits_with_the_verdicts_code(tmp_path: Path) -> None:
    repo = checkout(tmp_path)
    git(repo, "tag", "-a", "v1.1.1", "-m", "Payments, at last\n\nWith a new logo.", "v1.1.0")
    reports = junit_reports(tmp_path)
    shop = Service.objects.create(name="Shop", slug="shop")
    _, token = sources_services.create_token("CI of shop", shop)
    with ScriptedLLM() as llm, LiveSite(tmp_path / "logs", llm.environment()) as site:
        done = run_action(
            ACTION,
            {"url": site.url, "token": token, "service": "shop", "git-range": "v1.0.0..v1.1.1",
             "junit": f"{reports / 'unit.xml'} {reports / 'e2e.xml'}", "wait": "180"},
            repo,
            runner_environment(),
            ref_name="1.1.1",
        )  # fmt: skip
        logs = "\n".join(done.logs) + site.log_text()
    release = Release.objects.filter(service=shop, version="1.1.1").first()
    assert release is not None, logs
    assert release.title == "Payments, at last"
    assert TestCase.objects.filter(release=release).count() == 5
    verdict = release_verdict(release).as_json()
    assert verdict["state"] in ("assessed", "needs_person"), logs
    expected = gate.exit_code(verdict, "high")
    assert done.exit_code == expected != gate.NO_VERDICT, logs
    assert done.outputs["verdict"]["exit-code"] == str(expected)
    assert done.summary.startswith(f"### {'⏸️' if expected == 2 else '✅⛔'[expected]} Detective")
    assert f"· {gate.outcome(expected, 'high')} (exit {expected})" in done.summary


def exporter_metrics(path: Path, deployed: datetime) -> Path:
    """prometheus_client's shape, scraped once a minute: the release's 30 minutes from its
    deploy and the same 30 minutes a week earlier (a first release's baseline), both with
    the same 0.1 % of 5xx."""
    lines = ["# HELP http_requests_total Total requests.", "# TYPE http_requests_total counter"]
    for start in (deployed - timedelta(weeks=1), deployed):
        for minute in range(31):
            at = int((start + timedelta(minutes=minute)).timestamp() * 1000)
            lines.append(f'http_requests_total{{code="200"}} {1000 * minute} {at}')
            lines.append(f'http_requests_total{{code="500"}} {minute} {at}')
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.django_db(transaction=True)
def test_a_clean_first_release_with_its_deploy_time_passes_without_a_wait(
    tmp_path: Path,
) -> None:
    repo = checkout(tmp_path)
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "unit.xml").write_text(
        '<?xml version="1.0"?>\n<testsuite name="unit" tests="2">'
        '<testcase classname="tests.cart" name="test_add" time="0.01"/>'
        '<testcase classname="tests.pay" name="test_refund" time="0.2"/></testsuite>\n'
    )
    deployed = datetime(2026, 11, 23, 19, 0, tzinfo=UTC)
    metrics = exporter_metrics(tmp_path / "metrics.txt", deployed)
    shop = Service.objects.create(name="Shop", slug="shop")
    _, token = sources_services.create_token("CI of shop", shop)
    with ScriptedLLM() as llm, LiveSite(tmp_path / "logs", llm.environment()) as site:
        done = run_action(
            ACTION,
            {"url": site.url, "token": token, "service": "shop", "version": "1.1.0",
             "git-range": "v1.0.0..v1.1.0", "junit": str(reports / "unit.xml"),
             "metrics-file": str(metrics), "deployed-at": "2026-11-23T19:00:00Z",
             "wait": "180", "wait-for-decision": "600"},
            repo,
            runner_environment(),
        )  # fmt: skip
        # The next release with `deployed-at: none`: the file is still taken, read against
        # the stated fallback (all its samples the release's own, no baseline), and the
        # summary says so.
        unplaced = run_action(
            ACTION,
            {"url": site.url, "token": token, "service": "shop", "version": "1.1.1",
             "junit": str(reports / "unit.xml"), "metrics-file": str(metrics),
             "deployed-at": "none", "wait": "0"},
            repo,
            runner_environment(),
        )  # fmt: skip
        logs = "\n".join(done.logs + unplaced.logs) + site.log_text()
    assert unplaced.outputs["ingest"]["exit-code"] == "0", logs
    assert "- **Deploy time:** none, none sent (`deployed-at: none`)" in unplaced.summary
    fallback = "- **Note:** The release has no deploy time, so its metrics have no window: all 124"
    assert fallback in unplaced.summary, unplaced.summary
    assert Release.objects.get(service=shop, version="1.1.1").deployed_at is None
    release = Release.objects.get(service=shop, version="1.1.0")
    assert release.deployed_at == deployed
    assert release.deployment_metrics["error_rate_baseline"] > 0, logs
    verdict = release_verdict(release).as_json()
    # Assessed by the model, below the bar, and nobody asked: the wait for a decision (600 s
    # allowed) was never started.
    assert verdict["state"] == "assessed", logs
    assert done.exit_code == 0, logs
    assert "waiting for a person's decision" not in logs
    assert done.summary.startswith("### ✅ Detective"), done.summary
    assert "- **Deploy time:** 2026-11-23T19:00:00Z, as given (`deployed-at`)" in done.summary
    assert "Note:" not in done.summary  # the window and its baseline read as usual
