from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evals import scenario_sources
from evals.scenario import DEFAULT_SUITE_DIR, ScenarioError, load_suite
from evals.scenarios.files import make_files
from releases import selectors
from releases.models import Release, Service
from risk import policy
from sources import judging
from sources.models import Commit, Ingestion, MetricSample, TestCase
from traces.models import TraceIntake

pytestmark = pytest.mark.django_db

SEVERITY_RANK = {"low": 0, "medium": 1, "high": 2}


@pytest.fixture(scope="module")
def suite():
    return load_suite(pattern="tag:sources")


def test_the_files_are_what_the_script_writes(tmp_path: Path) -> None:
    for scenario in make_files.SCENARIOS:
        make_files.write(scenario, tmp_path)
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    files = DEFAULT_SUITE_DIR / "files"
    # The script's scenarios; those made of a git history were written by real tools.
    ids = {scenario.id for scenario in make_files.SCENARIOS}
    committed = sorted(
        p.relative_to(files)
        for p in files.rglob("*")
        if p.is_file() and p.suffix != ".py" and p.relative_to(files).parts[0] in ids
    )
    assert written == committed
    for name in written:
        assert (tmp_path / name).read_bytes() == (files / name).read_bytes(), name


def test_a_scenario_is_ingested_through_the_sources_services_once(suite) -> None:
    scenario = suite.get("new_failure_after_payment_change")
    release = scenario_sources.ingest_scenario(scenario)

    assert release.version == "v31.1.0"
    assert release.service.slug == scenario_sources.service_slug(scenario)
    assert release.service.hidden
    versions = list(
        Release.objects.filter(service=release.service)
        .order_by("deployed_at")
        .values_list("version", flat=True)
    )
    assert versions == ["v31.0.0", "v31.0.1", "v31.0.2", "v31.0.3", "v31.1.0"]
    # The summary is derived from the detail, as for a real release.
    assert release.test_results is not None
    assert release.test_results["failed"] == 2
    assert sorted(release.test_results["failing_tests"]) == [
        "payments.refunds_test::test_partial_refund_rounds_to_minor_unit",
        "payments.refunds_test::test_refund_in_jpy_has_no_decimals",
    ]
    assert release.changes is not None
    assert any("round partial refunds" in line for line in release.changes)
    assert release.deployment_metrics is not None
    assert release.deployment_metrics["response_time_p95"] == pytest.approx(415, rel=0.05)
    assert release.deployment_metrics["response_time_p95_baseline"] == pytest.approx(410, rel=0.05)
    assert Commit.objects.filter(release=release).count() == 2
    assert MetricSample.objects.filter(release=release, window="baseline").exists()

    counts = (Ingestion.objects.count(), TestCase.objects.count(), MetricSample.objects.count())
    again = scenario_sources.ingest_scenario(scenario)
    assert again.pk == release.pk
    assert (Ingestion.objects.count(), TestCase.objects.count(), MetricSample.objects.count()) == (
        counts
    )


def test_eval_services_stay_out_of_the_release_lists(suite) -> None:
    scenario_sources.ingest_scenario(suite.get("clean_docs_long_green_history"))
    listed = selectors.filtered_releases(selectors.ReleaseFilters())
    assert not listed.filter(service__hidden=True).exists()
    assert Service.objects.filter(hidden=True).count() == 1


def test_every_scenario_made_of_files_ingests_and_the_policy_is_not_above_it(suite) -> None:
    # The release API refuses a report below the policy's severity: an expectation the
    # policy outranks could never be filed. (Below it is the policy's shortfall: see the
    # evals' README for which of these the policy gets right.)
    ingested = scenario_sources.ingest_suite(suite)
    assert set(ingested.releases) == set(suite.ids)
    for scenario in ingested.suite.scenarios:
        payload = scenario.release_payload()
        assert payload is not None, scenario.id
        assert payload["version"] == scenario.release_id
        verdict = policy.evaluate(payload).severity
        top = max(SEVERITY_RANK[s] for s in scenario.expect.acceptable)
        assert SEVERITY_RANK[verdict] <= top, (scenario.id, verdict)
        # What the site made of the files is not the scenario: its fingerprint stays.
        assert scenario.fingerprint == suite.get(scenario.id).fingerprint


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    shutil.copy(DEFAULT_SUITE_DIR / "suite.toml", tmp_path)
    shutil.copy(DEFAULT_SUITE_DIR / "clean_docs_long_green_history.toml", tmp_path)
    with pytest.raises(ScenarioError, match=r"no file files/clean_docs_long_green_history/v37"):
        load_suite(tmp_path)


def test_changed_files_make_another_service(tmp_path: Path) -> None:
    shutil.copy(DEFAULT_SUITE_DIR / "suite.toml", tmp_path)
    shutil.copy(DEFAULT_SUITE_DIR / "clean_docs_long_green_history.toml", tmp_path)
    shutil.copytree(
        DEFAULT_SUITE_DIR / "files" / "clean_docs_long_green_history",
        tmp_path / "files" / "clean_docs_long_green_history",
    )
    before = load_suite(tmp_path).scenarios[0]
    notes = tmp_path / "files" / "clean_docs_long_green_history" / "v37.1.0.commits.json"
    notes.write_text(notes.read_text().replace("returns window", "returns period"))
    after = load_suite(tmp_path).scenarios[0]
    assert before.fingerprint != after.fingerprint
    assert scenario_sources.service_slug(before) != scenario_sources.service_slug(after)


def test_a_new_exception_in_one_route_is_the_verdict_and_the_release_before_never_says_it(
    suite,
) -> None:
    """Issue 36's done-when: tests green, the service-wide figures flat, and the release's
    OTLP traces (its files, through the traces app) show a new exception in 1 of 3 routes."""
    scenario = suite.get("new_exception_one_route")
    release = scenario_sources.ingest_scenario(scenario)
    assert release.test_results["failed"] == 0
    assert policy.evaluate(release.as_summary()).severity == "low"  # the summary alone
    verdict = judging.judge_release(release).verdict
    assert verdict.severity == "medium", verdict.as_dict()
    evidence = " ".join(verdict.evidence())
    assert (
        "ZeroDivisionError in shop/pricing.py `line_total`: 2 of 60 requests of "
        "GET /cart/{cart_id}/total since v39.1.0 (none before); new in this release"
    ) in evidence, evidence
    assert "'Round prices per line' (Ana Lima)" in evidence
    before = Release.objects.get(service=release.service, version="v39.0.2")
    earlier = judging.judge_release(before).verdict
    assert "ZeroDivisionError" not in " ".join(earlier.evidence()) + str(earlier.as_dict())
    # Ingested again (a second run of the suite): the figures are not added twice.
    assert scenario_sources.ingest_scenario(scenario).pk == release.pk
    intake = TraceIntake.objects.get(release=release)
    assert intake.spans == 180


def test_one_slow_route_is_the_verdict_named_by_its_route_with_the_service_flat(suite) -> None:
    """Issue 36, item 4: tests green, the service's error rate and p95 flat, one route of three
    many times slower than in the previous release: medium, naming the route and its figures;
    the previous release's own routes say nothing."""
    scenario = suite.get("route_slower_one_route")
    release = scenario_sources.ingest_scenario(scenario)
    assert release.test_results["failed"] == 0
    assert policy.evaluate(release.as_summary()).severity == "low"  # the summary alone
    verdict = judging.judge_release(release).verdict
    assert verdict.severity == "medium", verdict.as_dict()
    [signal] = [s for s in verdict.signals if s.level in ("medium", "high")]
    assert (signal.name, signal.figure) == ("route_regressions", "GET /products")
    assert signal.detail.startswith("GET /products: p95 ")
    assert "over 25 minutes against " in signal.detail
    assert "in the previous release (v45.0.2)" in signal.detail
    assert "among 6 route comparisons" in signal.detail
    before = Release.objects.get(service=release.service, version="v45.0.2")
    earlier = judging.judge_release(before).verdict
    assert earlier.severity == "low" and "route_regressions" not in str(earlier.as_dict())
