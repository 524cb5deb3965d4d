"""The scenarios whose key risk only the release's history shows (issue 40): a renamed test
file, an empty range, a Surefire rerun that failed (twice: written by make_files.py, and as a
real `mvn test` wrote it over a git history), an error in setup after a migration. The
product must say each itself: the policy's evidence as the small profile reads it (the brief
view's keyed sentences, which that model copies into its findings) names every key risk, and
the policy's severity is one the scenario accepts."""

from __future__ import annotations

import pytest

from assessments import filing
from evals import scenario_sources
from evals.evaluators.culprit_named import names_commit
from evals.evaluators.matching import find_group
from evals.scenario import Suite, load_suite
from sources import judging
from sources.models import TestCase

pytestmark = pytest.mark.django_db

HISTORY_ONLY = {
    "renamed_test_file_fails": "medium",
    "empty_range_errors_rise": "high",
    "surefire_rerun_failure": "medium",
    "setup_error_after_migration": "high",
    "rerun_failure_java_search_client": "medium",
}


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite()


@pytest.mark.parametrize("scenario_id", sorted(HISTORY_ONLY))
def test_the_brief_evidence_says_every_key_risk(suite: Suite, scenario_id: str) -> None:
    scenario = suite.get(scenario_id)
    release = scenario_sources.ingest_scenario(scenario)
    judged = judging.judge_release(release)
    brief = judged.for_agent(brief=True)["policy"]
    text = " ".join(brief["evidence"].values())
    # As the decision-quality evaluator matches a report's findings and summary.
    missing = [g.name for g in scenario.expect.key_risks if find_group(text, g) is None]
    assert not missing, (scenario_id, missing, text)
    assert len(scenario.expect.key_risks) >= 2
    assert brief["severity_floor"] == HISTORY_ONLY[scenario_id]
    assert brief["severity_floor"] in scenario.expect.acceptable
    # A report of those sentences at the policy's severity, as the small profile files it,
    # is stored as it is: the new clauses give the grounding nothing to send to a person.
    checked = filing.file_checked_report(
        release=release,
        severity=brief["severity_floor"],
        findings=list(brief["evidence"].values()),
    )
    assert checked.report is not None and not checked.report.needs_review, (
        checked.report.review_reasons if checked.report else checked
    )


def test_the_files_hold_what_the_scenarios_are_about(suite: Suite) -> None:
    """The real formats carry the risk: git's rename (old_path), an empty commits list,
    Surefire's rerunFailure, pytest's 'failed on setup'."""
    renamed = scenario_sources.ingest_scenario(suite.get("renamed_test_file_fails"))
    assert renamed.commits.filter(files__old_path="shipping/rates_test.py").exists()

    rebuild = scenario_sources.ingest_scenario(suite.get("empty_range_errors_rise"))
    assert not rebuild.commits.exists()
    assert rebuild.changes is not None and rebuild.changes[0].startswith("No changes")

    rerun = scenario_sources.ingest_scenario(suite.get("surefire_rerun_failure"))
    attempts = TestCase.objects.filter(release=rerun, name="retriesWhenTheIndexIsBusy")
    assert list(attempts.order_by("attempt").values_list("status", flat=True)) == ["failed"] * 3

    setup = scenario_sources.ingest_scenario(suite.get("setup_error_after_migration"))
    errors = TestCase.objects.filter(release=setup, status="error")
    assert errors.count() == 3
    assert all(
        m.startswith("failed on setup") for m in errors.values_list("failure_message", flat=True)
    )


def test_the_rerun_failure_of_a_real_surefire_run_names_its_culprit(suite: Suite) -> None:
    """The reports `mvn test -Dsurefire.rerunFailingTestsCount=2` wrote: the test that passed
    on a rerun in two earlier releases errors on all three runs here. Excused as known flaky
    before, it had no suspect sentence; now its first suspect is the commit that wrote the
    line it fails at, not the newest commit, which touched the same file."""
    scenario = suite.get("rerun_failure_java_search_client")
    release = scenario_sources.ingest_scenario(scenario)
    attempts = TestCase.objects.filter(release=release, name="retriesWhenTheIndexIsBusy")
    assert list(attempts.order_by("attempt").values_list("status", flat=True)) == ["error"] * 3
    culprit = scenario_sources.culprit_of(scenario, release)
    assert culprit is not None
    newest = release.commits.order_by("-authored_at").first()
    assert newest is not None and newest.sha != culprit.sha
    evidence = judging.judge_release(release).for_agent()["policy"]["evidence"]
    said = [s for s in evidence if "SearchIndexClient.java line 24" in s]
    assert len(said) == 1 and names_commit(said[0], culprit) == culprit.sha[:7]
    assert not any("known flaky" in s for s in evidence)


def test_the_slow_route_is_in_the_brief_and_a_report_of_it_is_kept_as_filed(suite: Suite) -> None:
    """Issue 36: the small profile copies the policy's sentences; the route's figures in them
    are ones the grounding finds in the release's data, so the report needs no person."""
    scenario = suite.get("route_slower_one_route")
    release = scenario_sources.ingest_scenario(scenario)
    brief = judging.judge_release(release).for_agent(brief=True)["policy"]
    text = " ".join(brief["evidence"].values())
    assert [g.name for g in scenario.expect.key_risks if find_group(text, g) is None] == []
    assert brief["severity_floor"] == "medium" and "GET /products: p95 " in text
    checked = filing.file_checked_report(
        release=release, severity="medium", findings=list(brief["evidence"].values())
    )
    assert checked.report is not None and not checked.report.needs_review, (
        checked.report.review_reasons if checked.report else checked
    )
