"""The assessment benchmark's set-up: its releases in a site, and where it finds the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import assessment
from bench.harness import Skip
from releases.models import Release


@pytest.mark.django_db
def test_prepare_puts_releases_of_files_and_of_a_summary_into_the_site() -> None:
    targets = assessment.prepare(["known_flaky_failures", "context_pressure_400_changes"])

    by_scenario = {target["scenario"]: target for target in targets}
    ingested = Release.objects.get(
        version=by_scenario["known_flaky_failures"]["version"],
        service__slug=by_scenario["known_flaky_failures"]["service"],
    )
    assert ingested.test_results is not None and ingested.test_results["failed"] == 2
    typed = Release.objects.get(
        version=by_scenario["context_pressure_400_changes"]["version"],
        service__slug=assessment.SERVICE,
    )
    assert len(typed.changes) > 400  # 400 generated and the risky one among them


def test_every_release_of_the_benchmark_is_a_scenario_of_the_suite() -> None:
    from evals.scenario import load_suite

    ids = {scenario.id for scenario in load_suite().scenarios}
    assert set(assessment.RELEASES) <= ids
    assert len(assessment.RELEASES) == 10


def test_without_a_model_server_the_benchmark_is_skipped(
    monkeypatch: pytest.MonkeyPatch, settings: object, tmp_path: Path
) -> None:
    monkeypatch.delenv(assessment.MODEL_URL_ENV, raising=False)
    settings.DATA_DIR = tmp_path  # type: ignore[attr-defined]
    with pytest.raises(Skip, match="local_model serve"):
        assessment.model_url()
    monkeypatch.setenv(assessment.MODEL_URL_ENV, "http://127.0.0.1:1/v1")
    assert assessment.model_url() == "http://127.0.0.1:1/v1"
