from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from evals.models import EvalResult, EvalRun
from releases.models import Conversation

pytestmark = pytest.mark.django_db


def test_each_trial_of_a_scenario_is_stored_once() -> None:
    run = EvalRun.objects.create(suite_version="1")
    EvalResult.objects.create(run=run, scenario_id="high_risk", trial=1, passed=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        EvalResult.objects.create(run=run, scenario_id="high_risk", trial=1, passed=False)
    with pytest.raises(IntegrityError), transaction.atomic():
        EvalResult.objects.create(run=run, scenario_id="high_risk", trial=0)
    EvalResult.objects.create(
        run=EvalRun.objects.create(suite_version="1"), scenario_id="high_risk", trial=1
    )


def test_results_are_ordered_by_scenario_then_trial() -> None:
    run = EvalRun.objects.create(suite_version="1")
    for scenario, trial in [("low", 2), ("high", 2), ("low", 1), ("high", 1)]:
        EvalResult.objects.create(run=run, scenario_id=scenario, trial=trial)
    assert [(r.scenario_id, r.trial) for r in run.results.all()] == [
        ("high", 1),
        ("high", 2),
        ("low", 1),
        ("low", 2),
    ]


def test_an_errored_trial_is_neither_passed_nor_failed_and_keeps_its_transcript() -> None:
    run = EvalRun.objects.create(suite_version="1")
    conversation = Conversation.objects.create()
    result = EvalResult.objects.create(
        run=run,
        scenario_id="timeout",
        trial=1,
        error="provider unreachable",
        conversation=conversation,
    )
    assert result.passed is None
    conversation.delete()
    result.refresh_from_db()
    assert result.conversation is None


def test_runs_are_newest_first_and_status_is_checked() -> None:
    first = EvalRun.objects.create(suite_version="1")
    second = EvalRun.objects.create(suite_version="1")
    assert list(EvalRun.objects.all()) == [second, first]
    with pytest.raises(IntegrityError), transaction.atomic():
        EvalRun.objects.create(suite_version="1", status="done")
