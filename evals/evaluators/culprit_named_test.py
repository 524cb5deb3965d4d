from __future__ import annotations

import pytest

from evals.evaluators.culprit_named import NAME, culprit_check, names_commit
from evals.evaluators.decision_quality import DecisionQualityEvaluator
from evals.evaluators.trial import evaluate
from evals.runner.transcript import FiledReport, Transcript
from evals.scenario import Culprit, Scenario, Suite

SHA = "248229227cbe436022c18f6767f4741c36b878d8"
SUBJECT = "Charge the remote-area surcharge by postcode prefix"
CULPRIT = Culprit(sha=SHA, subject=SUBJECT)
POLICY_SAYS = (
    "test_quote_world_heavy_parcel fails in parcel/rates.py line 39, a line changed by "
    f"2482292 '{SUBJECT}' (Priya Raman)"
)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (POLICY_SAYS, "2482292"),
        ("The surcharge lookup broke quotes (commit 24822922).", "24822922"),
        (f"Introduced by {SHA}.", SHA),
        ("Commit 248229227CBE raised KeyError.", "248229227CBE"),
        (f'"{SUBJECT.lower()}" broke every quote.', repr(SUBJECT)),
        ("Charge the remote-area\nsurcharge by postcode prefix: KeyError.", repr(SUBJECT)),
    ],
)
def test_a_short_sha_or_the_subject_names_the_commit(text: str, named: str) -> None:
    assert names_commit(text, CULPRIT) == named


@pytest.mark.parametrize(
    "text",
    [
        "Four quote tests fail with KeyError in parcel/rates.py.",
        "The newest commit 0eab703 'Log each quote at debug level' is the likely cause.",
        "2482292"[:6] + " is a prefix too short to name a commit.",
        "Commit a2482292 is another one.",
        "Commit 2482293 is another one.",
        "Charge the remote-area surcharge (by region) broke it.",
    ],
)
def test_another_commit_a_near_miss_or_none_does_not(text: str) -> None:
    assert names_commit(text, CULPRIT) is None


@pytest.fixture
def scenario(suite: Suite) -> Scenario:
    return suite.get("culprit_python_remote_surcharge").model_copy(
        update={"culprit_commit": CULPRIT}
    )


def _report(findings: list[str], policy: list[str] | None = None) -> Transcript:
    return Transcript(
        report=FiledReport(
            release_id="v1.5.0",
            severity="medium",
            findings=findings,
            policy_findings=policy or [],
            summary="Overall the risk is medium.",
        )
    )


def test_a_report_that_names_the_culprit_passes(scenario: Scenario) -> None:
    check = culprit_check(scenario, _report(["Four quote tests fail.", POLICY_SAYS]))
    assert check is not None and check.passed and check.name == NAME
    assert check.detail == "2482292 named as 2482292"


def test_what_the_policy_carried_into_the_stored_report_counts(scenario: Scenario) -> None:
    check = culprit_check(scenario, _report(["Four quote tests fail."], [POLICY_SAYS]))
    assert check is not None and check.passed


def test_a_report_that_omits_the_culprit_fails_decision_quality_and_the_trial(
    scenario: Scenario,
) -> None:
    transcript = _report(["Four quote tests fail with KeyError in the shipping rates."])
    check = culprit_check(scenario, transcript)
    assert check is not None and not check.passed
    assert check.detail == f"the report names neither 2482292 nor {SUBJECT!r}"
    score = DecisionQualityEvaluator().evaluate(scenario, transcript)
    assert score is not None and not score.passed
    assert NAME in {c.name for c in score.failed_checks}
    findings = ["Four quote tests fail with KeyError in the shipping rates.", POLICY_SAYS]
    named = DecisionQualityEvaluator().evaluate(scenario, _report(findings))
    assert named is not None and NAME not in {c.name for c in named.failed_checks}
    assert named.value > score.value
    result = evaluate(scenario, transcript)
    assert result.status == "failed"
    assert any(reason.startswith(f"decision_quality: {NAME}") for reason in result.failure_reasons)


def test_a_scenario_not_ingested_cannot_pass_and_one_without_a_culprit_is_not_judged(
    suite: Suite,
) -> None:
    raw = suite.get("culprit_python_remote_surcharge")
    check = culprit_check(raw, _report([POLICY_SAYS]))
    assert check is not None and not check.passed and "not ingested" in check.detail
    assert culprit_check(suite.get("high_payment_failures"), _report([POLICY_SAYS])) is None
    assert culprit_check(raw, Transcript()) is None
