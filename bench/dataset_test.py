from __future__ import annotations

import pytest

from bench.dataset import seed
from bench.page_timing import measure
from evals.models import EvalRun
from releases.models import Conversation, Release, RiskReport

pytestmark = pytest.mark.django_db


def test_seeding_adds_what_is_missing_and_pages_are_timed(django_user_model) -> None:  # type: ignore[no-untyped-def]
    first = seed(releases=12, runs_per_release=3, eval_runs=2, trials=1)
    assert first["counts"]["releases"] == 12
    assert first["counts"]["runs"] == 36
    assert 0 < first["counts"]["reports"] <= 36  # a failed run files none
    again = seed(releases=20, runs_per_release=3, eval_runs=4, trials=1)
    assert again["made"]["releases"] == 8
    assert Release.objects.count() == 20 and Conversation.objects.count() == 60
    assert RiskReport.objects.filter(conversation__isnull=True).count() == 0
    assert EvalRun.objects.count() == 4
    assert EvalRun.objects.filter(is_baseline=True).count() == 1
    assert all(run.summary for run in EvalRun.objects.all())

    django_user_model.objects.create_superuser("bench", "bench@example.invalid", None)
    paths = {"list": "/releases/", "detail": f"/releases/{again['release']}/"}
    timed = measure(paths, rounds=2, warmup=1)["pages"]
    for name in paths:
        assert timed[name]["status"] == 200
        assert len(timed[name]["ms"]) == 2
        assert len(set(timed[name]["queries"])) == 1
