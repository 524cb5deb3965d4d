"""The seed_demo command: its releases come in through the sources' services, from a git
repository, JUnit XML and OpenMetrics made on the fly (tests live here: a module inside
commands/ is a command)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

import demo_shop
from agent.events import parse_event
from assessments import services, tasks
from assessments.timeline import outcome
from releases.models import AgentEvent, Conversation, Message, Release, RiskReport, RunStatus
from releases.selectors import releases_with_latest_report
from sources import demo_files
from sources.demo_releases import DEMO_RELEASES
from sources.models import Commit, CommitFile, Ingestion, MetricSample

pytestmark = pytest.mark.django_db


def counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (Release, RiskReport, Conversation, Message, AgentEvent)
    }


def test_seed_demo_is_idempotent() -> None:
    call_command("seed_demo", stdout=StringIO())
    first = counts()
    call_command("seed_demo", stdout=StringIO())
    assert counts() == first
    assert first["Release"] == len(DEMO_RELEASES) >= 12


def test_seed_demo_spans_every_risk_and_incomplete_data() -> None:
    call_command("seed_demo", stdout=StringIO())
    latest = {r.version: r.latest_report for r in releases_with_latest_report()}
    severities = {report.severity for report in latest.values() if report}
    assert severities == {"high", "medium", "low"}
    assert any(report is None for report in latest.values())
    releases = Release.objects.all()
    assert any(r.changes is None for r in releases)
    assert any(r.test_results is None for r in releases)
    assert any(r.deployment_metrics is None for r in releases)
    for release in releases:
        release.full_clean()  # demo data obeys the schemas


def test_seed_demo_keeps_releases_edited_since() -> None:
    call_command("seed_demo", stdout=StringIO())
    Release.objects.filter(version="v2.1.0").update(title="Edited")
    call_command("seed_demo", stdout=StringIO())
    assert Release.objects.get(version="v2.1.0").title == "Edited"


def test_the_demo_run_is_a_complete_transcript() -> None:
    call_command("seed_demo", stdout=StringIO())
    run = Conversation.objects.get()
    assert [m.position for m in run.messages.all()] == list(range(5))
    events = list(run.events.order_by("seq"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert run.risk_reports.get().severity == "high"
    times = [m.created_at for m in run.messages.all()] + [e.created_at for e in events]
    assert all(run.started_at <= moment <= run.finished_at for moment in times)
    # One story: the report the run filed is filed as the run ends, not an hour later.
    filed = run.risk_reports.get().filed_at
    assert run.started_at < filed and abs((run.finished_at - filed).total_seconds()) < 1
    # The agent's own event shapes: each payload parses back into its event.
    assert [parse_event(e.payload).kind for e in events] == [e.kind for e in events]
    kinds = [e.kind for e in events]
    assert kinds.count("tool_call") == kinds.count("tool_result") == 2
    assert kinds[-2:] == ["report_filed", "run_finished"]
    assert outcome("run_finished", events[-1].payload) == (RunStatus.SUCCEEDED, "")


def test_the_demo_run_page_reads_like_a_real_run(admin_client: Client) -> None:
    call_command("seed_demo", stdout=StringIO())
    run = Conversation.objects.get()
    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert 'Called <code class="tl-tool-name">get_release_summary</code>' in page
    assert "file_risk_report</code>" in page and "Called <code" in page
    assert page.count("tl-flag-ok") == 2 and "tl-flag-failed" not in page
    assert "Started with <strong>demo-transcript</strong>" in page
    assert "2,310 in · 412 out · $0.0131" in page
    assert "Finished: the report is filed" in page


def test_seed_demo_replaces_a_demo_run_written_in_the_old_shapes() -> None:
    call_command("seed_demo", stdout=StringIO())
    old = Conversation.objects.get()
    AgentEvent.objects.filter(conversation=old, seq=1).update(payload={"release_id": "v2.1.0"})
    real = services.start_assessment(
        old.release, None, enqueue=tasks.enqueue_assessment
    )  # a real run since: the demo stays
    call_command("seed_demo", stdout=StringIO())
    run = Conversation.objects.get(metadata__demo=True)
    assert run.pk != old.pk
    assert set(Conversation.objects.values_list("pk", flat=True)) == {run.pk, real.pk}
    assert all("kind" in e.payload for e in run.events.all())
    assert run.risk_reports.get().severity == "high"


def test_the_demo_list_never_says_never_run_beside_a_report(admin_client: Client) -> None:
    call_command("seed_demo", stdout=StringIO())
    page = admin_client.get("/releases/").content.decode()
    # A release whose reports were seeded without a run says so, not "never run".
    assert "none: filed by hand" in page
    rows = page.split("<tr")[1:]
    assert not [r for r in rows if "never run" in r and "</time>" in r.split("Latest run")[0]]


# ---- through the real path -----------------------------------------------------------------------


def test_the_demo_is_ingested_from_git_junit_and_openmetrics() -> None:
    call_command("seed_demo", stdout=StringIO())
    kinds = set(Ingestion.objects.filter(origin="seed").values_list("kind", flat=True))
    assert kinds == {"release", "commits", "junit", "metrics"}
    services = set(Release.objects.values_list("service__slug", flat=True))
    assert services == {"default", "search-api", "shop"}
    assert all(Release.objects.filter(service__slug=slug).count() >= 2 for slug in services)
    # A real git history: a range per release, a rename, a binary file, the head's SHA.
    first = Release.objects.get(service__slug="default", version="v2.0.0")
    assert (first.git_from_ref, first.git_to_ref) == ("demo-start", "v2.0.0")
    assert first.head_sha and Commit.objects.filter(release=first, sha=first.head_sha).exists()
    assert CommitFile.objects.filter(commit__release=first, binary=True).exists()
    assert CommitFile.objects.filter(commit__release=first).exclude(old_path="").exists()
    breaking = Commit.objects.get(release=first, message__contains="/v1/cart")
    assert (breaking.change_type, breaking.scope, breaking.breaking) == ("feat", "api", True)
    # Each release's summary says what the demo says, derived from the detail.
    for demo in DEMO_RELEASES:
        release = Release.objects.get(
            service__slug=demo_files.service_slug(demo), version=demo.version
        )
        if demo.test_results is None:
            assert release.test_results is None
        else:
            for key in ("passed", "failed", "skipped"):
                assert release.test_results[key] == demo.test_results[key], demo.version
            named = demo.test_results.get("failing_tests", [])
            assert set(named) <= set(release.test_results["failing_tests"]), demo.version
        if demo.deployment_metrics is None:
            assert release.deployment_metrics is None
        else:
            for key in ("error_rate", "response_time_p95"):
                assert release.deployment_metrics[key] == demo.deployment_metrics[key]
        if demo.changes is None:
            assert release.changes is None
        else:
            subjects = [line.rsplit(" (", 1)[0] for line in release.changes]
            assert subjects == demo.changes, demo.version


def test_the_shops_commits_are_the_code_demo_traffic_runs() -> None:
    """The shop's git history is its real code (demo_shop/versions), with each file's changed
    lines: the line 1.1.0's exception runs through is one its commit changed."""
    call_command("seed_demo", stdout=StringIO())
    [changed] = CommitFile.objects.filter(
        commit__release__service__slug="shop", commit__release__version="v1.1.0"
    )
    assert changed.path == "shop/pricing.py" and changed.hunks
    code = demo_shop.tree_at("v1.1.0")["shop/pricing.py"].splitlines()
    [division] = [n for n, line in enumerate(code, 1) if "/ line.quantity" in line]
    assert any(new <= division < new + count for _, _, new, count in changed.hunks)
    # The other services' commits carry no hunks, as before: their verdicts are unchanged.
    assert (
        not CommitFile.objects.filter(hunks__isnull=False)
        .exclude(commit__release__service__slug="shop")
        .exists()
    )


def test_each_release_has_the_previous_ones_figures_as_its_baseline() -> None:
    call_command("seed_demo", stdout=StringIO())
    release = Release.objects.get(service__slug="default", version="v2.3.0")
    assert release.deployment_metrics["response_time_p95_baseline"] == 430  # v2.2.1's
    baseline = MetricSample.objects.filter(
        release=release, window="baseline", name="response_time_p95"
    )
    assert baseline.count() == 30
    kept = Release.objects.get(service__slug="default", version="v2.5.0-rc2")
    assert kept.changes == [] and not kept.commits.exists()  # typed in by hand


def test_the_demo_keeps_its_verdicts() -> None:
    call_command("seed_demo", stdout=StringIO())
    verdicts = {
        release.version: (report.severity, report.policy_severity, report.needs_review)
        for release in Release.objects.filter(service__slug="default")
        if (report := release.risk_reports.order_by("-filed_at").first())
    }
    assert verdicts == {
        "v2.0.0": ("high", "high", False),
        "v2.0.1": ("low", "low", False),
        "v2.1.0": ("high", "high", False),
        "v2.1.1": ("low", "high", True),
        "v2.2.0": ("medium", "high", True),
        "v2.2.1": ("low", "low", False),
        "v2.3.0": ("high", "high", False),
        "v2.3.1": ("medium", "medium", False),
    }


def test_without_git_the_seed_stops_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sources.demo_files.shutil.which", lambda name: None)
    with pytest.raises(CommandError, match="git is not installed"):
        call_command("seed_demo", stdout=StringIO())
    assert not Release.objects.exists()
