from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from evals import api_source, services
from evals.models import EvalRun
from releases.models import Conversation, RunStatus
from tests.eval_data import make_run, suite

pytestmark = pytest.mark.django_db


def test_the_database_allows_one_baseline() -> None:
    EvalRun.objects.create(suite_version="1", is_baseline=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        EvalRun.objects.create(suite_version="1", is_baseline=True)


def test_marking_a_baseline_unmarks_the_previous_one() -> None:
    first = make_run(scenarios=suite().scenarios[:1], trials=1, baseline=True)
    second = make_run(scenarios=suite().scenarios[:1], trials=1)
    services.mark_baseline(second)
    assert list(EvalRun.objects.filter(is_baseline=True)) == [second]
    services.mark_baseline(second)  # again: still one
    assert EvalRun.objects.filter(is_baseline=True).count() == 1
    first.refresh_from_db()
    assert not first.is_baseline


def test_a_run_records_its_trials_and_summary() -> None:
    scenario = suite().get("high_payment_failures")
    run = make_run({scenario.id: ["passed", "failed", "errored"]}, scenarios=[scenario], trials=3)
    assert run.status == RunStatus.SUCCEEDED
    assert run.planned_trials == 3
    assert run.config["scenarios"] == [scenario.id]
    assert run.code_revision == "abc123def456"
    results = {r.trial: r for r in run.results.all()}
    assert [results[n].status for n in (1, 2, 3)] == ["passed", "failed", "errored"]
    assert results[3].passed is None and "[provider]" in results[3].error
    assert results[1].trial_result().passed
    summary = run.run_summary()
    assert summary is not None
    assert (summary.passed, summary.failed, summary.errored) == (1, 1, 1)
    assert run.pass_rate == 0.5
    assert run.headline["pass_hat_k"] == 0.0
    assert summary.scenarios[0].critical  # titles and criticality come from the suite


def test_a_run_without_results_finishes_without_a_summary() -> None:
    run = services.start_run(suite(), trials=1, provider="p", model="m")
    assert services.finish_run(run, status=RunStatus.FAILED, error="boom") is None
    run.refresh_from_db()
    assert run.summary is None and run.error == "boom" and run.finished_at is not None


def test_stale_runs_are_marked_failed_and_keep_what_they_did() -> None:
    alive = services.start_run(suite(), trials=1, provider="p", model="m")
    dead = make_run(scenarios=suite().scenarios[:1], trials=1, finish=False)
    EvalRun.objects.filter(pk=dead.pk).update(
        heartbeat_at=timezone.now() - services.STALE_AFTER - timedelta(seconds=1)
    )
    assert services.fail_stale_runs() == 1
    dead.refresh_from_db()
    alive.refresh_from_db()
    assert dead.status == RunStatus.FAILED and "stopped responding" in dead.error
    assert dead.pass_rate == 1.0
    assert alive.status == RunStatus.RUNNING
    assert services.fail_stale_runs() == 0


def test_a_trial_is_a_running_conversation_with_a_token_until_it_finishes() -> None:
    run = services.start_run(suite(), trials=1, provider="p", model="m")
    scenario = suite().get("summary_timeout")
    conversation, token = services.start_trial(run, scenario, 2, provider="p", model="m")
    assert token and conversation.status == RunStatus.RUNNING and conversation.release is None
    spec = conversation.metadata[api_source.EVAL_KEY]
    assert spec["scenario_id"] == scenario.id and spec["trial"] == 2
    assert spec["fault"]["mode"] == "timeout"
    earlier = timezone.now() - timedelta(minutes=5)
    Conversation.objects.filter(pk=conversation.pk).update(heartbeat_at=earlier)
    services.heartbeat(run.pk, [conversation.pk])
    conversation.refresh_from_db()
    assert conversation.heartbeat_at > earlier
    terminal = {"kind": "run_finished", "reason": "answered", "steps": 2}
    services.finish_trial(
        conversation.pk,
        terminal,
        {"usage": {"input_tokens": 10, "output_tokens": 5}, "estimated_cost_usd": 0.001},
    )
    conversation.refresh_from_db()
    assert conversation.status == RunStatus.SUCCEEDED
    assert conversation.api_token_hash == ""
    assert (conversation.input_tokens, conversation.output_tokens) == (10, 5)


def test_a_trial_without_a_final_event_failed() -> None:
    run = services.start_run(suite(), trials=1, provider="p", model="m")
    conversation, _ = services.start_trial(run, suite().scenarios[0], 1, provider="p", model="m")
    services.finish_trial(conversation.pk, None, {})
    conversation.refresh_from_db()
    assert conversation.status == RunStatus.FAILED and "without a final event" in conversation.error


def test_the_code_revision_is_the_commit_or_unknown(tmp_path: Path) -> None:
    assert len(services.code_revision()) == 40
    assert services.code_revision(tmp_path) == "unknown"
