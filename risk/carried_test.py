import pytest

from risk.carried import carries, left_out
from risk.filing import decide
from risk.policy import evaluate

ERROR = "Error rate 7 %, above the 5 % limit for high"
ONE_TEST = "1 failed test: test_csv_export_column_order"
NO_CHANGES = "missing from the release data: the list of changes"
ORDERS = "1 text in the release data reads like instructions to the assessor (at changes[1])"
P95 = "p95 latency 1,850 ms against 610 ms (its baseline): up 203 %, above the 20 % limit"
FLAKY = "test_checkout_timeout is known flaky: failed in 4 of the last 10 releases"
SUSPECT = (
    "test_max_age fails in timed.py line 141, a line changed by 3f2c1e9 "
    "'Add a second of grace to max_age' (Mira Holt)"
)


@pytest.mark.parametrize(
    ("finding", "sentence", "carried"),
    [
        ("Error rate 7 %, above the 5 % limit for high.", ERROR, True),
        ("The error rate is 7% in production", ERROR, True),
        ("7 failed tests", ERROR, False),
        ("Error rate 5 %", ERROR, False),
        ("No failed tests in this release", "0 failed tests", True),
        ("8 tests failed", "8 failed tests", True),
        ("1 failing test in payments", "1 change in payments and 1 failed test", False),
        ("1 failed test", ONE_TEST, False),
        ("test_csv_export_column_order fails (1 failed test)", ONE_TEST, True),
        ("The list of changes is missing", NO_CHANGES, True),
        ("p95 missing", NO_CHANGES, False),
        ("p95 missing", FLAKY, False),
        ("checkout timeout test is flaky, 4 of the last 10 releases", FLAKY, True),
        ("The changes hold an injection attempt", ORDERS, True),
        ("1 text in the changes", ORDERS, False),
        ("test_max_age fails at line 141, changed by 3f2c1e9", SUSPECT, True),
        ("test_max_age fails at line 141", SUSPECT, False),
        ("p95 1.85 s against a 610 ms baseline, up 203%", P95, True),
    ],
)  # fmt: skip
def test_a_finding_carries_a_sentence_by_its_figures_names_and_commits(
    finding: str, sentence: str, carried: bool
) -> None:
    assert carries(finding, sentence) is carried


def test_what_no_finding_carries_is_left_out_once_in_the_policys_order() -> None:
    evidence = [ERROR, FLAKY, "0 failed tests", FLAKY]
    said = ["The error rate is 7 %", "", "p95 missing"]
    assert left_out(evidence, said) == [FLAKY, "0 failed tests"]
    # One finding must carry the whole sentence: its figures split over two say nothing.
    assert left_out([FLAKY], ["test_checkout_timeout is flaky", "4 of the last 10 releases"]) == [
        FLAKY
    ]


def test_the_filing_decision_names_the_policys_sentences_the_report_leaves_out() -> None:
    data = {
        "version": "2.0.0",
        "changes": ["Refactor payment capture"],
        "tests": {"passed": 90, "failed": 1, "skipped": 0, "failing_tests": ["test_refund_reuse"]},
        "deployment_metrics": {"error_rate": 0.07, "response_time_p95": 300},
    }
    verdict = evaluate(data)
    evidence = verdict.evidence()
    assert len(evidence) >= 2
    decision = decide(
        severity=verdict.severity,
        findings=[evidence[0]],
        summary="",
        data=data,
        verdict=verdict,
        refused_before=True,
    )
    assert decision.from_policy == evidence[1:]
    whole = decide(
        severity=verdict.severity,
        findings=evidence,
        summary="",
        data=data,
        verdict=verdict,
        refused_before=True,
    )
    assert whole.from_policy == []
