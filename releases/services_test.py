from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from assessments import services as run_services
from assessments import tasks
from releases import services
from releases.models import AgentEvent, Conversation, Release, RiskReport, RunStatus
from review import services as review_services

pytestmark = pytest.mark.django_db


def test_create_release_validates_and_keeps_missing_data_missing() -> None:
    release = services.create_release(version="v9", test_results={"passed": 1})
    assert release.pk is not None
    assert release.changes is None
    assert release.deployment_metrics is None
    with pytest.raises(ValidationError):
        services.create_release(version="v10", test_results={"passed": -3})
    with pytest.raises(ValidationError):
        services.create_release(version="v9")  # duplicate version
    assert Release.objects.count() == 1


def test_append_message_numbers_positions_from_zero() -> None:
    conversation = Conversation.objects.create()
    first = run_services.append_message(conversation, role="user", content="Assess v1")
    second = run_services.append_message(
        conversation,
        role="assistant",
        tool_calls=[{"id": "c1", "name": "get_release_summary", "arguments": {}}],
    )
    third = run_services.append_message(conversation, role="tool", tool_call_id="c1", content="{}")
    assert [first.position, second.position, third.position] == [0, 1, 2]
    assert first.tool_calls == []
    other = run_services.append_message(Conversation.objects.create(), role="user")
    assert other.position == 0


def test_append_event_numbers_events_from_one_without_gaps() -> None:
    conversation = Conversation.objects.create()
    seqs = [run_services.append_event(conversation, kind="text_delta").seq for _ in range(3)]
    assert seqs == [1, 2, 3]
    assert run_services.append_event(Conversation.objects.create(), kind="run_started").seq == 1


# ---- assessments ----------------------------------------------------------------------------


@pytest.fixture
def user(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user(username="rm", password="a-long-password")


def test_start_assessment_queues_a_run_and_enqueues_its_task_on_commit(
    make_release: Callable[..., Release], user: User, django_capture_on_commit_callbacks: Any
) -> None:
    release = make_release("v3.0.0")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        run = run_services.start_assessment(
            release, user, model="m", enqueue=tasks.enqueue_assessment
        )
    assert len(callbacks) == 1
    run.refresh_from_db()
    assert (run.status, run.triggered_by, run.model) == (RunStatus.QUEUED, user, "m")
    task = DBTaskResult.objects.get(pk=run.task_id)
    assert task.task_path == "assessments.tasks.assess_release"
    assert task.args_kwargs["args"][0] == str(run.pk)


def test_a_second_start_joins_the_active_run(
    make_release: Callable[..., Release], user: User
) -> None:
    release = make_release()
    first = run_services.start_assessment(release, user, enqueue=tasks.enqueue_assessment)
    assert run_services.start_assessment(release, None, enqueue=tasks.enqueue_assessment) == first
    Conversation.objects.filter(pk=first.pk).update(status=RunStatus.SUCCEEDED)
    assert run_services.start_assessment(release, user, enqueue=tasks.enqueue_assessment) != first


def test_cancelling_a_queued_run_ends_it_at_once_with_an_event(
    make_release: Callable[..., Release], user: User
) -> None:
    run = run_services.start_assessment(make_release(), user, enqueue=tasks.enqueue_assessment)
    run = run_services.cancel_assessment(run)
    assert run.status == RunStatus.CANCELLED and run.finished_at is not None
    event = AgentEvent.objects.get(conversation=run)
    assert (event.seq, event.kind) == (1, "run_cancelled")
    assert run_services.mark_running(run.pk) is None  # the worker finds nothing to do


def test_cancelling_a_running_run_raises_the_flag_its_worker_polls(
    make_release: Callable[..., Release], user: User
) -> None:
    run = run_services.start_assessment(make_release(), user, enqueue=tasks.enqueue_assessment)
    assert run_services.mark_running(run.pk) is not None
    assert run_services.heartbeat(run.pk) is run_services.Pulse.GO_ON
    run = run_services.cancel_assessment(run)
    assert run.status == RunStatus.RUNNING and run.cancel_requested_at is not None
    assert run_services.heartbeat(run.pk) is run_services.Pulse.CANCEL


def test_finish_run_records_the_outcome_and_kills_the_token(
    make_release: Callable[..., Release], user: User
) -> None:
    from releases import selectors

    run = run_services.start_assessment(make_release(), user, enqueue=tasks.enqueue_assessment)
    run_services.mark_running(run.pk)
    token = run_services.issue_run_token(run.pk)
    assert selectors.run_for_api_token(token) == run
    assert token not in str(Conversation.objects.filter(pk=run.pk).values().first())
    assert run_services.finish_run(run.pk, status=RunStatus.SUCCEEDED, input_tokens=5)
    assert selectors.run_for_api_token(token) is None
    assert not run_services.finish_run(run.pk, status=RunStatus.FAILED)  # already over
    assert Conversation.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED


def test_a_run_whose_heartbeat_stopped_is_failed_with_the_reason(
    make_release: Callable[..., Release], user: User, settings: Any
) -> None:
    settings.DETECTIVE_RUN_STALE_SECONDS = 30
    run = run_services.start_assessment(make_release(), user, enqueue=tasks.enqueue_assessment)
    run_services.mark_running(run.pk)
    run_services.append_event(run, kind="run_started", payload={"kind": "run_started"})
    assert run_services.fail_stale_runs() == []  # alive
    beat = timezone.now() - timedelta(seconds=31)
    Conversation.objects.filter(pk=run.pk).update(heartbeat_at=beat)
    assert [r.pk for r in run_services.fail_stale_runs()] == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("The worker stopped responding at ")
    assert run_services.heartbeat(run.pk) is run_services.Pulse.GONE  # a late worker backs off
    last = AgentEvent.objects.filter(conversation=run).order_by("-seq").first()
    assert (last.seq, last.kind, last.payload["error_type"]) == (2, "run_failed", "WorkerLost")
    assert run_services.fail_stale_runs() == []


def test_a_queued_run_whose_task_is_gone_is_failed(
    make_release: Callable[..., Release], user: User
) -> None:
    run = run_services.start_assessment(make_release(), user, enqueue=tasks.enqueue_assessment)
    old = timezone.now() - timedelta(minutes=5)
    Conversation.objects.filter(pk=run.pk).update(created_at=old)
    assert [r.pk for r in run_services.fail_stale_runs()] == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "never handed to a worker" in run.error


def _claimed_by(run: Conversation, worker: str) -> None:
    DBTaskResult.objects.filter(pk=run.task_id).update(status="RUNNING", worker_ids=[worker])


def test_a_run_whose_worker_on_this_machine_is_gone_is_failed_at_once(
    make_release: Callable[..., Release], user: User, django_capture_on_commit_callbacks: Any
) -> None:
    import subprocess
    import sys

    from assessments import workers

    with django_capture_on_commit_callbacks(execute=True):
        run = run_services.start_assessment(make_release(), user, enqueue=tasks.enqueue_assessment)
    run_services.mark_running(run.pk)
    run.refresh_from_db()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _claimed_by(run, workers.worker_id(dead.pid))
    assert [r.pk for r in run_services.fail_stale_runs()] == [run.pk]  # heartbeat still fresh
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error.startswith(f"The worker running it (pid {dead.pid}) stopped")
    task = DBTaskResult.objects.get(pk=run.task_id)
    assert task.status == "FAILED" and task.finished_at is not None
    assert task.traceback == run.error
    assert (
        run_services.start_assessment(run.release, user, enqueue=tasks.enqueue_assessment) != run
    )  # reassess at once


def test_a_run_of_a_worker_elsewhere_waits_for_its_heartbeat(
    make_release: Callable[..., Release], user: User, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        run = run_services.start_assessment(make_release(), user, enqueue=tasks.enqueue_assessment)
    run_services.mark_running(run.pk)
    run.refresh_from_db()
    _claimed_by(run, "another-machine:1")
    assert run_services.fail_orphaned_runs() == []
    _claimed_by(run, "k3Jd9a0random0worker0id0of0db0worker")
    assert run_services.fail_orphaned_runs() == []
    assert Conversation.objects.get(pk=run.pk).status == RunStatus.RUNNING


# ---- review ---------------------------------------------------------------------------------


def _report(make_release: Callable[..., Release], **fields: Any) -> RiskReport:
    fields.setdefault("severity", "medium")
    fields.setdefault("findings", ["1 test failed", "error rate 3.1 %"])
    return RiskReport.objects.create(
        release=make_release(), policy_severity="medium", needs_review=True, **fields
    )


def test_an_accept_records_who_and_keeps_the_verdicts(
    make_release: Callable[..., Release], django_user_model: type[User]
) -> None:
    from releases.models import ReviewDecision

    reviewer = django_user_model.objects.create(username="rm")
    report = _report(make_release)
    # An accept takes one of the two verdicts: another severity is an override, with a reason.
    with pytest.raises(review_services.ReviewError, match="is an override, with a reason"):
        review_services.decide_report(report, reviewer, decision="accept", severity="high")
    decision = review_services.decide_report(report, reviewer, decision="accept")
    assert (decision.severity, decision.model_severity, decision.reviewer) == (
        "medium",
        "medium",
        reviewer,
    )
    assert ReviewDecision.objects.get().policy_severity == "medium"
    report.refresh_from_db()
    assert report.severity == "medium"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"decision": "override", "severity": "high"}, "needs a reason"),
        ({"decision": "override", "severity": "medium", "reason": "x"}, "already says medium"),
        ({"decision": "override", "severity": "urgent", "reason": "x"}, "Choose the severity"),
        ({"decision": "maybe"}, "Accept the report or override it"),
        ({"decision": "accept", "wrong_finding": "not a finding"}, "not one of the report"),
    ],
)
def test_a_decision_that_makes_no_sense_is_refused(
    make_release: Callable[..., Release], fields: dict[str, str], message: str
) -> None:
    from releases.models import ReviewDecision

    with pytest.raises(review_services.ReviewError, match=message):
        review_services.decide_report(_report(make_release), None, **fields)
    assert not ReviewDecision.objects.exists()


def test_an_override_is_exported_as_a_scenario_the_suite_loads(
    make_release: Callable[..., Release], django_user_model: type[User], tmp_path: Any
) -> None:
    from evals.scenario import load_suite

    report = _report(make_release)
    reviewer = django_user_model.objects.create(username="rm")
    decision = review_services.decide_report(
        report,
        reviewer,
        decision="override",
        severity="high",
        reason="The refund test guards money.",
        wrong_finding="error rate 3.1 %",
    )
    path = review_services.export_scenario(decision, tmp_path)
    decision.refresh_from_db()
    assert path.name == f"{decision.scenario_id}.toml"
    suite = load_suite(pattern="tag:from-review", extra_dirs=[tmp_path])
    (loaded,) = suite.scenarios
    assert loaded.id == decision.scenario_id
    assert loaded.expect.severity == "high"
    assert "The refund test guards money." in loaded.description
    assert "+review." in suite.version
    # Exporting again rewrites the one file.
    review_services.export_scenario(decision, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_plain_accept_is_not_exported(
    make_release: Callable[..., Release], tmp_path: Any
) -> None:
    decision = review_services.decide_report(_report(make_release), None, decision="accept")
    with pytest.raises(review_services.ReviewError, match="teaches the suite"):
        review_services.export_scenario(decision, tmp_path)
    assert not list(tmp_path.iterdir())


def test_siding_with_the_policy_is_an_accept_and_needs_no_reason(
    make_release: Callable[..., Release],
) -> None:
    report = _report(make_release, severity="low")  # the policy gives medium
    decision = review_services.decide_report(report, None, decision="override", severity="medium")
    assert (decision.decision, decision.severity, decision.reason) == ("accept", "medium", "")
    # Deciding again is a deliberate override of the first decision (one decision per report).
    again = review_services.decide_report(
        report, None, decision="accept", severity="medium", supersedes=decision.pk
    )
    assert again.severity == "medium"


@pytest.mark.django_db
def test_no_event_is_appended_after_the_run_has_ended(make_release: Callable[..., Release]) -> None:
    from agent.events import RetryScheduled
    from assessments.runner.store import OrmConversationStore

    run = Conversation.objects.create(release=make_release(), status=RunStatus.RUNNING)
    run_services.append_event(run, kind="run_started", payload={})
    # The sweep fails the run (its worker was paused past the heartbeat) ...
    ended = run_services.append_event(run, kind="run_failed", payload={"message": "lost"})
    # ... and the resumed worker's late events are refused, the sweep's verdict stands.
    with pytest.raises(run_services.RunEnded):
        run_services.append_event(run, kind="run_cancelled", payload={})
    late = RetryScheduled(attempt=1, max_attempts=3, delay_s=1.0, reason="x", error_type="y")
    assert OrmConversationStore().append_event(str(run.pk), late) == ended.seq
    assert list(run.events.values_list("kind", flat=True)) == ["run_started", "run_failed"]


# ---- data that arrives during a run (issue 37, item 5) ------------------------------------


def _running_with_report(release: Release, user: User) -> Conversation:
    run = run_services.start_assessment(release, user, enqueue=tasks.enqueue_assessment)
    run_services.mark_running(run.pk)
    RiskReport.objects.create(release=release, severity="low", conversation=run)
    return run


def test_data_that_arrives_during_a_run_marks_it_stale_and_queues_the_next_one(
    make_release: Callable[..., Release], user: User, django_capture_on_commit_callbacks: Any
) -> None:
    from releases.release_verdict import VerdictState, verdict_of

    release = make_release("v5.0.0", test_results={"passed": 10, "failed": 0, "skipped": 0})
    run = _running_with_report(release, user)
    # A late shard: the release's figures change while the model is at work.
    Release.objects.filter(pk=release.pk).update(
        test_results={"passed": 10, "failed": 5, "skipped": 0}
    )
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert run_services.finish_run(
            run.pk, status=RunStatus.SUCCEEDED, outcome="filed", follow_up=tasks.enqueue_assessment
        )
    assert len(callbacks) == 1  # the next run's task, once all this is committed
    run.refresh_from_db()
    follow = Conversation.objects.filter(release=release).exclude(pk=run.pk).get()
    assert follow.status == RunStatus.QUEUED and follow.task_id
    assert run.metadata[run_services.STALE_KEY] == {"followed_by": str(follow.pk)}
    assert run_services.STALE_DETAIL in run.outcome_detail
    assert follow.metadata["asked_by"] == f"new data during run {run.pk}"
    # The stale report is not the verdict: the release is being assessed again.
    release.refresh_from_db()
    assert verdict_of(release).state == VerdictState.RUNNING


def test_a_run_on_unchanged_data_or_without_its_worker_queues_nothing(
    make_release: Callable[..., Release], user: User
) -> None:
    unchanged = _running_with_report(make_release("v5.1.0"), user)
    assert run_services.finish_run(
        unchanged.pk, status=RunStatus.SUCCEEDED, follow_up=tasks.enqueue_assessment
    )
    # `manage.py assess` runs it in its own process, with no worker to run a next one.
    release = make_release("v5.2.0", test_results={"passed": 1, "failed": 0, "skipped": 0})
    in_process = _running_with_report(release, user)
    Release.objects.filter(pk=release.pk).update(test_results={"passed": 0, "failed": 1})
    assert run_services.finish_run(in_process.pk, status=RunStatus.SUCCEEDED)
    assert Conversation.objects.count() == 2
    assert Conversation.objects.filter(status=RunStatus.QUEUED).count() == 0


def test_data_that_arrives_while_the_run_is_queued_is_read_by_it(
    make_release: Callable[..., Release], user: User
) -> None:
    release = make_release("v5.3.0", test_results={"passed": 1, "failed": 0, "skipped": 0})
    run = run_services.start_assessment(release, user, enqueue=tasks.enqueue_assessment)
    Release.objects.filter(pk=release.pk).update(test_results={"passed": 0, "failed": 1})
    run_services.mark_running(run.pk)  # the worker starts it on the data there is now
    RiskReport.objects.create(release=release, severity="medium", conversation=run)
    assert run_services.finish_run(
        run.pk, status=RunStatus.SUCCEEDED, follow_up=tasks.enqueue_assessment
    )
    assert Conversation.objects.filter(release=release).count() == 1
