from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from releases.models import (
    AgentEvent,
    Conversation,
    Message,
    Release,
    RiskReport,
    RunStatus,
    Severity,
)

pytestmark = pytest.mark.django_db


@contextmanager
def integrity_error() -> Iterator[None]:
    """Expect an IntegrityError, inside a savepoint so that the test can go on."""
    with pytest.raises(IntegrityError), transaction.atomic():
        yield


# ---- Release -----------------------------------------------------------------------------------


def test_release_version_is_unique(make_release: Callable[..., Release]) -> None:
    make_release("v1.0.0")
    with integrity_error():
        Release.objects.create(version="v1.0.0")


def test_releases_are_listed_newest_first(make_release: Callable[..., Release]) -> None:
    now = timezone.now()
    make_release("old", created_at=now - timedelta(days=2))
    make_release("new", created_at=now)
    make_release("middle", created_at=now - timedelta(days=1))
    assert [r.version for r in Release.objects.all()] == ["new", "middle", "old"]


def test_missing_release_data_stays_missing_not_zero() -> None:
    Release.objects.create(version="bare")
    release = Release.objects.get(version="bare")
    assert release.changes is None
    assert release.test_results is None
    assert release.deployment_metrics is None
    assert release.as_summary() == {
        "version": "bare",
        "title": None,
        "changes": None,
        "tests": None,
        "deployment_metrics": None,
    }
    assert Release.objects.filter(test_results__isnull=True).count() == 1


def test_release_summary_has_the_shape_of_the_spec(make_release: Callable[..., Release]) -> None:
    release = make_release(
        "v2.1.0",
        changes=["Added payment processing", "Fixed authentication bug"],
        test_results={"passed": 142, "failed": 2, "skipped": 5},
        deployment_metrics={"error_rate": 0.02, "response_time_p95": 450},
    )
    summary = release.as_summary()
    assert summary["version"] == "v2.1.0"
    assert summary["tests"] == {"passed": 142, "failed": 2, "skipped": 5}
    assert summary["deployment_metrics"]["response_time_p95"] == 450


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("changes", "not a list"),
        ("changes", [1, 2]),
        ("test_results", {"passed": -1}),
        ("test_results", {"passed": 1.5}),
        ("test_results", {"pased": 3}),
        ("test_results", {"failing_tests": "one"}),
        ("deployment_metrics", {"error_rate": 1.5}),
        ("deployment_metrics", {"error_rate": "high"}),
        ("deployment_metrics", {"cpu": "busy"}),
    ],
)
def test_release_data_is_validated_against_its_schema(field: str, value: Any) -> None:
    release = Release(version="v1", **{field: value})
    with pytest.raises(ValidationError) as error:
        release.full_clean()
    assert field in error.value.message_dict


def test_partial_release_data_is_valid() -> None:
    release = Release(
        version="v1",
        changes=[],
        test_results={"passed": 3},
        deployment_metrics={"error_rate": None, "cpu_utilization": 0.4},
    )
    release.full_clean()


# ---- Conversation ------------------------------------------------------------------------------


def test_conversation_status_must_be_a_known_state(make_release: Callable[..., Release]) -> None:
    with integrity_error():
        Conversation.objects.create(release=make_release(), status="exploded")


def test_a_release_has_at_most_one_active_run(make_release: Callable[..., Release]) -> None:
    release = make_release()
    Conversation.objects.create(release=release, status=RunStatus.QUEUED)
    with integrity_error():
        Conversation.objects.create(release=release, status=RunStatus.RUNNING)
    # Finished runs do not count, and other releases are independent.
    Conversation.objects.create(release=release, status=RunStatus.SUCCEEDED)
    Conversation.objects.create(release=release, status=RunStatus.FAILED)
    Conversation.objects.create(release=make_release(), status=RunStatus.RUNNING)
    Conversation.objects.create(release=None, status=RunStatus.RUNNING)
    Conversation.objects.create(release=None, status=RunStatus.RUNNING)
    assert release.conversations.count() == 3


def test_a_run_cannot_finish_before_it_started() -> None:
    now = timezone.now()
    with integrity_error():
        Conversation.objects.create(started_at=now, finished_at=now - timedelta(seconds=1))


def test_conversation_derived_values() -> None:
    now = timezone.now()
    conversation = Conversation(
        input_tokens=100, output_tokens=None, started_at=now, finished_at=now + timedelta(seconds=3)
    )
    assert conversation.total_tokens == 100
    assert conversation.duration == 3.0
    assert Conversation().total_tokens is None
    assert Conversation().duration is None
    assert Conversation(status=RunStatus.RUNNING).is_active
    assert not Conversation(status=RunStatus.CANCELLED).is_active


def test_run_assessment_permission_and_release_managers_group() -> None:
    permission = Permission.objects.get(codename="run_assessment")
    assert permission.content_type.model == "conversation"
    group = Group.objects.get(name="Release managers")
    assert group.permissions.filter(pk=permission.pk).exists()


# ---- Message and AgentEvent ---------------------------------------------------------------------


def test_messages_are_ordered_by_position_and_positions_are_unique() -> None:
    conversation = Conversation.objects.create()
    for position, role in [(2, "assistant"), (0, "system"), (1, "user")]:
        Message.objects.create(conversation=conversation, position=position, role=role)
    assert [m.role for m in conversation.messages.all()] == ["system", "user", "assistant"]
    with integrity_error():
        Message.objects.create(conversation=conversation, position=1, role="user")


def test_message_role_is_checked() -> None:
    with integrity_error():
        Message.objects.create(conversation=Conversation.objects.create(), position=0, role="bot")


def test_events_are_ordered_by_seq_which_is_unique_and_positive() -> None:
    conversation = Conversation.objects.create()
    for seq in [3, 1, 2]:
        AgentEvent.objects.create(conversation=conversation, seq=seq, kind=f"k{seq}")
    assert [e.seq for e in conversation.events.all()] == [1, 2, 3]
    with integrity_error():
        AgentEvent.objects.create(conversation=conversation, seq=2, kind="again")
    with integrity_error():
        AgentEvent.objects.create(conversation=conversation, seq=0, kind="zero")
    # Another run numbers its events independently.
    AgentEvent.objects.create(conversation=Conversation.objects.create(), seq=1, kind="k1")


def test_deleting_a_run_deletes_its_record_but_keeps_its_reports(
    make_release: Callable[..., Release],
) -> None:
    release = make_release()
    conversation = Conversation.objects.create(release=release, status=RunStatus.SUCCEEDED)
    Message.objects.create(conversation=conversation, position=0, role="user")
    AgentEvent.objects.create(conversation=conversation, seq=1, kind="run_started")
    report = RiskReport.objects.create(
        release=release, conversation=conversation, severity=Severity.LOW
    )
    conversation.delete()
    assert not Message.objects.exists()
    assert not AgentEvent.objects.exists()
    report.refresh_from_db()
    assert report.conversation is None


# ---- RiskReport ----------------------------------------------------------------------------------


def test_report_severity_must_be_high_medium_or_low(make_release: Callable[..., Release]) -> None:
    with integrity_error():
        RiskReport.objects.create(release=make_release(), severity="critical")


def test_reports_are_newest_first_and_latest_report_follows(
    make_release: Callable[..., Release],
) -> None:
    release = make_release()
    now = timezone.now()
    assert release.latest_report is None
    RiskReport.objects.create(release=release, severity="high", filed_at=now - timedelta(days=1))
    newest = RiskReport.objects.create(release=release, severity="low", filed_at=now)
    RiskReport.objects.create(release=release, severity="medium", filed_at=now - timedelta(days=2))
    assert [r.severity for r in release.risk_reports.all()] == ["low", "high", "medium"]
    assert release.latest_report == newest
    assert RiskReport.objects.filter(release=release).latest() == newest


def test_findings_must_be_a_list_of_strings(make_release: Callable[..., Release]) -> None:
    report = RiskReport(release=make_release(), severity="low", findings="all good")
    with pytest.raises(ValidationError) as error:
        report.full_clean()
    assert "findings" in error.value.message_dict


@pytest.mark.parametrize("version", ["v1/2", "v1 2", "<script>alert(1)</script>", "v" * 65, ""])
def test_a_release_version_outside_the_format_is_refused(version: str) -> None:
    from releases import services

    with pytest.raises(ValidationError) as caught:
        services.create_release(version=version)
    assert "version" in caught.value.message_dict
    assert not Release.objects.exists()


def test_the_version_migration_reports_bad_rows_and_changes_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import importlib

    from django.apps import apps

    migration = importlib.import_module("releases.migrations.0006_release_version_format")
    Release.objects.create(version="v1.0.0")
    # A row from before the rule: bulk_create skips save(), which validates.
    (bad,) = Release.objects.bulk_create([Release(version="v1/2")])
    migration.report_bad_versions(apps, None)
    out = capsys.readouterr().out
    assert "1 release version(s) do not follow the format" in out
    assert f"id {bad.pk}: 'v1/2'" in out
    assert "v1.0.0" not in out
    assert set(Release.objects.values_list("version", flat=True)) == {"v1.0.0", "v1/2"}
