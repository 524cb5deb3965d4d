"""The seed_demo command (tests live here: a module inside commands/ is a command)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from agent.events import parse_event
from releases import services, tasks
from releases.management.commands.seed_demo import DEMO_RELEASES
from releases.models import AgentEvent, Conversation, Message, Release, RiskReport, RunStatus
from releases.selectors import releases_with_latest_report
from releases.timeline import outcome

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
