"""A database written by the code before the house was cut by context (2026-11-27) keeps every
release, run, message, event, report and decision, and a run queued before the move still
names a task a worker can import (assessments/migrations/0001_task_paths.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone
from django.utils.module_loading import import_string

from releases.models import AgentEvent, Conversation, Message, Release, ReviewDecision, RiskReport

BEFORE = [("assessments", None), ("releases", "0015_evidence_policy_findings")]
# What today's code reads and writes: the releases app and the task queue, as they stand.
BEFORE_STATE = [
    ("releases", "0015_evidence_policy_findings"),
    ("django_tasks_database", "0021_conditional_partial_index_ordering"),
]
OLD_TASK = "releases.tasks.assess_release"


def _migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


@pytest.fixture
def before_the_move(transactional_db: None) -> Iterator[object]:
    """The schema and app registry of today's code, its rows written through it; the whole
    set of migrations is applied again afterwards for the tests that follow."""
    executor = _migrate(BEFORE)
    yield executor.loader.project_state(BEFORE_STATE).apps
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_every_row_written_before_the_move_is_read_back_after_it(before_the_move: object) -> None:
    apps = before_the_move
    now = timezone.now()
    Service = apps.get_model("releases", "Service")  # type: ignore[attr-defined]
    service, _ = Service.objects.get_or_create(slug="default", defaults={"name": "default"})
    OldRelease = apps.get_model("releases", "Release")  # type: ignore[attr-defined]
    OldRun = apps.get_model("releases", "Conversation")  # type: ignore[attr-defined]
    OldMessage = apps.get_model("releases", "Message")  # type: ignore[attr-defined]
    OldEvent = apps.get_model("releases", "AgentEvent")  # type: ignore[attr-defined]
    OldReport = apps.get_model("releases", "RiskReport")  # type: ignore[attr-defined]
    OldDecision = apps.get_model("releases", "ReviewDecision")  # type: ignore[attr-defined]
    Task = apps.get_model("django_tasks_database", "DBTaskResult")  # type: ignore[attr-defined]

    written: dict[str, set[object]] = {key: set() for key in ("release", "run", "report")}
    for n in range(3):
        release = OldRelease.objects.create(service=service, version=f"v1.{n}.0", title=f"r{n}")
        run = OldRun.objects.create(
            release=release, status="succeeded", started_at=now, finished_at=now
        )
        for seq in (1, 2):
            OldEvent.objects.create(conversation=run, seq=seq, kind="tool_call", payload={"n": seq})
            OldMessage.objects.create(conversation=run, position=seq - 1, role="user", content="hi")
        report = OldReport.objects.create(
            release=release, conversation=run, severity="high", findings=[f"finding {n}"]
        )
        OldDecision.objects.create(
            report=report, decision="override", severity="low", reason=f"known {n}"
        )
        written["release"].add(release.pk)
        written["run"].add(run.pk)
        written["report"].add(report.pk)
    queued = OldRun.objects.create(release=release, status="queued")
    task = Task.objects.create(
        task_path=OLD_TASK,
        args_kwargs={"args": [str(queued.pk), ""], "kwargs": {}},
        queue_name="default",
        backend_name="default",
        status="READY",
        priority=0,
        run_after=now,
        exception_class_path="",
        traceback="",
    )

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    assert set(Release.objects.values_list("pk", flat=True)) == written["release"]
    assert set(Conversation.objects.values_list("pk", flat=True)) == {*written["run"], queued.pk}
    assert set(RiskReport.objects.values_list("pk", flat=True)) == written["report"]
    assert AgentEvent.objects.count() == 6 and Message.objects.count() == 6
    assert sorted(ReviewDecision.objects.values_list("reason", flat=True)) == [
        "known 0",
        "known 1",
        "known 2",
    ]
    report = RiskReport.objects.get(findings=["finding 1"])
    assert report.conversation is not None
    assert [e.payload for e in report.conversation.events.order_by("seq")] == [{"n": 1}, {"n": 2}]
    # The queued run's task row names the task where it lives now, and a worker can import it.
    from django_tasks_db.models import DBTaskResult

    moved = DBTaskResult.objects.get(pk=task.pk)
    assert moved.task_path == "assessments.tasks.assess_release"
    assert import_string(moved.task_path).name == "assess_release"
