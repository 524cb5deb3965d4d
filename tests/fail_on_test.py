"""`--fail-on medium-known` (issue 37, item 8), the bar between high and medium: a medium the
release's own data shows (failing tests) fails; a medium that rests on missing fields alone (no
metrics sent) passes, where `--fail-on medium` fails it. The same answer from the verdict API
and the CI client's exit code, from `manage.py verdict`, for the policy's verdict and for a
model's report that agrees with it."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from detective_client import verdict as client_verdict
from releases.models import Release, RiskReport
from releases.release_verdict import verdict_of

pytestmark = pytest.mark.django_db

API_KEY = "k" * 40


def verdict_command(*args: str) -> int:
    out = io.StringIO()
    with pytest.raises(SystemExit) as ended:
        call_command("verdict", *args, stdout=out, stderr=out)
    return int(ended.value.code or 0)


def api_verdict(version: str) -> dict[str, Any]:
    answer = Client().get(
        f"/api/releases/{version}/verdict", headers={"Authorization": f"Bearer {API_KEY}"}
    )
    assert answer.status_code == 200, answer.content
    return dict(answer.json())


def codes(version: str) -> dict[str, tuple[int, int]]:
    """For each bar: (manage.py verdict's exit, the client's exit on the API's answer)."""
    body = api_verdict(version)
    return {
        bar: (verdict_command(version, "--fail-on", bar), client_verdict.exit_code(body, bar))
        for bar in ("high", "medium-known", "medium")
    }


@pytest.fixture
def releases(make_release: Callable[..., Release], settings: Any) -> tuple[Release, Release]:
    settings.DETECTIVE_API_KEY = API_KEY
    # No metrics sent: the policy counts the missing field as medium.
    no_metrics = make_release("2.0.0", deployment_metrics=None)
    failing = make_release(
        "2.0.1",
        deployment_metrics=None,
        test_results={"passed": 8, "failed": 2, "skipped": 0},
    )
    return no_metrics, failing


def test_the_policys_medium_on_missing_metrics_passes_medium_known_failures_do_not(
    releases: tuple[Release, Release],
) -> None:
    no_metrics, failing = releases
    assert verdict_of(no_metrics).severity == verdict_of(failing).severity == "medium"
    assert api_verdict("2.0.0")["missing_data_only"] is True
    assert api_verdict("2.0.1")["missing_data_only"] is False
    assert codes("2.0.0") == {"high": (0, 0), "medium-known": (0, 0), "medium": (1, 1)}
    assert codes("2.0.1") == {"high": (0, 0), "medium-known": (1, 1), "medium": (1, 1)}


def test_a_models_report_and_a_persons_decision_are_judged_the_same_way(
    releases: tuple[Release, Release], django_user_model: Any
) -> None:
    from review import services as review_services

    no_metrics, _ = releases
    signals = [
        {"name": "missing_deployment_metrics", "level": "medium", "critical": False},
        {"name": "change_size", "level": "low", "critical": False},
    ]
    report = RiskReport.objects.create(
        release=no_metrics, severity="medium", policy_severity="medium", signals=signals
    )
    assert api_verdict("2.0.0")["source"] == "model"
    assert codes("2.0.0")["medium-known"] == (0, 0)
    # A person who decides medium means it: it is no longer "missing data".
    manager = django_user_model.objects.create_superuser("rm", password="a-long-password")
    review_services.decide_report(report, manager, decision="accept", severity="medium")
    assert api_verdict("2.0.0")["missing_data_only"] is False
    assert codes("2.0.0")["medium-known"] == (1, 1)
