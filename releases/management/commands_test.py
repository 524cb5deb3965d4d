"""The seed_demo and up commands (tests live here: a module inside commands/ is a command)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from pydantic import SecretStr
from pytest_django import Settings

from agent.events import parse_event
from releases import services, tasks
from releases.management.commands.seed_demo import DEMO_RELEASES
from releases.management.commands.up import Command as UpCommand
from releases.management.commands.up import ensure_admin, port_is_free
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


# ---- up ----------------------------------------------------------------------------------------


def test_ensure_admin_generates_a_password_only_for_a_new_account() -> None:
    generated = ensure_admin(None)
    assert generated
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser
    assert admin.check_password(generated)
    assert ensure_admin(None) is None
    admin.refresh_from_db()
    assert admin.check_password(generated)


def test_ensure_admin_applies_the_configured_password_and_restores_rights() -> None:
    assert ensure_admin("first-password") is None
    user_model = get_user_model()
    user_model.objects.filter(username="admin").update(is_staff=False, is_active=False)
    assert ensure_admin("second-password") is None
    admin = user_model.objects.get(username="admin")
    assert admin.check_password("second-password")
    assert admin.is_staff
    assert admin.is_active


def test_up_prepare_only_migrates_seeds_and_prints_the_password_once(
    settings: Settings,
) -> None:
    settings.CONFIG = settings.CONFIG.model_copy(update={"admin_password": None})
    out = StringIO()
    call_command("up", "--prepare-only", stdout=out)
    assert Release.objects.count() == len(DEMO_RELEASES)
    assert "with the password:" in out.getvalue()

    out = StringIO()
    call_command("up", "--prepare-only", stdout=out)
    assert "password" not in out.getvalue()
    assert "Demo data" not in out.getvalue()  # not seeded again: there are releases


def test_up_uses_the_configured_admin_password(settings: Settings) -> None:
    settings.CONFIG = settings.CONFIG.model_copy(
        update={"admin_password": SecretStr("from-the-environment")}
    )
    out = StringIO()
    call_command("up", "--prepare-only", stdout=out)
    assert "password" not in out.getvalue()
    assert get_user_model().objects.get(username="admin").check_password("from-the-environment")


def test_up_starts_daphne_and_the_worker_with_host_and_port() -> None:
    web = UpCommand.web_argv("0.0.0.0", 9000, 1)
    assert web[1:3] == ["-m", "detective_site.web_server"]  # daphne, answering big headers
    assert web[web.index("--bind") + 1] == "0.0.0.0"
    assert web[web.index("--port") + 1] == "9000"
    assert web[-1] == "detective_site.asgi:application"
    worker = UpCommand.worker_argv(1)
    assert "run_worker" in worker  # db_worker, plus the sweep of runs whose worker died
    assert "--no-reload" in worker  # the autoreloader would add a process of its own


def test_up_gives_the_worker_the_address_of_its_web_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DETECTIVE_API_URL", raising=False)
    assert UpCommand.child_environment("0.0.0.0", 9000, {})["DETECTIVE_API_URL"] == (
        "http://127.0.0.1:9000"
    )
    assert UpCommand.child_environment("::", 9000, {})["DETECTIVE_API_URL"] == "http://[::1]:9000"
    monkeypatch.setenv("DETECTIVE_API_URL", "https://releases.example.com")
    environment = UpCommand.child_environment("127.0.0.1", 9000, {"X": "1"})
    assert environment["DETECTIVE_API_URL"] == "https://releases.example.com"
    assert environment["X"] == "1"


def test_port_is_free() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert not port_is_free("127.0.0.1", port)
