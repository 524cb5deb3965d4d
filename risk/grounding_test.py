"""Grounding, on labelled findings: invented counts, invented failures, legitimate derived
figures, and figures that match only by coincidence."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from risk.grounding import CLIP_CHARS, clip, ground_report, ground_text
from risk.policy import PolicySettings, evaluate
from risk.signal import Signal

CLEAN: dict[str, Any] = {
    "changes": ["Documentation updates", "Fix typo in the footer"],
    "tests": {"passed": 150, "failed": 0, "skipped": 2},
    "deployment_metrics": {"error_rate": 0.004, "response_time_p95": 380},
}
FAILING: dict[str, Any] = {
    "changes": ["Rewrite payment processing", "Update checkout button styles"],
    "tests": {
        "passed": 120,
        "failed": 8,
        "skipped": 2,
        "failing_tests": [
            "test_payment_capture_idempotent",
            "test_payment_refund_partial",
            "test_checkout_total_with_tax",
            "test_orders_migration_backfill",
            "test_a",
            "test_b",
            "test_c",
            "test_d",
        ],
    },
    "deployment_metrics": {
        "error_rate": 0.07,
        "response_time_p95": 520,
        "response_time_p95_baseline": 410,
    },
}
NO_TESTS: dict[str, Any] = {**CLEAN, "tests": None}


def problems(text: str, data: dict[str, Any]) -> list[str]:
    return ground_text("finding 1", text, data, evaluate(data)).problems


# (text, data, grounded)
LABELLED = [
    # invented counts and failures
    ("2 payment tests failing", CLEAN, False),
    ("1 failed UI test", CLEAN, False),
    ("Payment tests are failing", CLEAN, False),
    ("3 failed tests in checkout", NO_TESTS, False),
    ("Tests failing in auth", NO_TESTS, False),
    ("5 failed tests", FAILING, False),  # it has 8
    # what the data says, in several spellings
    ("8 failed tests, among them payment capture and refund", FAILING, True),
    ("3 payment tests failing", FAILING, True),  # three of the failing tests are payments'
    ("error_rate 0.07 (7%) is above the 5% threshold", FAILING, True),
    ("Error rate 7.0 % in production", FAILING, True),
    ("error rate 0.004 (0.4%)", CLEAN, True),
    ("All 150 tests passed, 0 failed, 2 skipped", CLEAN, True),
    ("No failed tests", CLEAN, True),
    ("No test results: the tests are missing", NO_TESTS, True),
    ("p95 latency 380 ms", CLEAN, True),
    ("p95 latency 0.38 s", CLEAN, True),
    # derived figures, with what they are derived from
    ("152 tests in total", CLEAN, True),
    ("p95 latency up 27% against its baseline (520 ms vs 410 ms)", FAILING, True),
    ("p95 rose by 110 ms", FAILING, True),
    ("error rate 2 points above the 5% threshold", FAILING, True),
    ("93.8% of the executed tests passed", FAILING, True),
    # the same numbers without saying what they are derived from: coincidences
    ("27% of users are affected", FAILING, False),
    ("110 ms added by the new PSP client", FAILING, False),
    # comparisons that the figures contradict
    ("error_rate 0.004 is above the threshold of 0.05", CLEAN, False),
    ("error rate 0.07 is below 0.05", FAILING, False),
    # invented figures of any size
    ("The error rate reached 42.7% in production", CLEAN, False),
    ("p95 latency 1200 ms", CLEAN, False),
    # prose
    ("3 risky areas deserve attention", CLEAN, True),
]


@pytest.mark.parametrize(("text", "data", "grounded"), LABELLED)
def test_labelled_findings(text: str, data: dict[str, Any], grounded: bool) -> None:
    found = problems(text, data)
    assert (not found) == grounded, found


def test_a_problem_quotes_what_is_wrong() -> None:
    found = problems("2 payment tests failing", CLEAN)
    assert any("0 failed tests" in p for p in found)
    assert any("not one of the release's test counts" in p for p in found)


def test_evidence_names_the_measure_and_the_signal() -> None:
    grounded = ground_text("finding 1", "error_rate 0.07 (7%)", FAILING, evaluate(FAILING))
    assert grounded.evidence[0] == "0.07 = the error rate"
    assert "error_rate" in grounded.signals


def test_a_report_is_grounded_part_by_part() -> None:
    data = FAILING
    report = ground_report(
        ["8 failed tests", "The error rate reached 42.7%"],
        "High: payments fail.",
        data,
        evaluate(data),
    )
    assert [p.grounded for p in report.parts] == [True, False, True]
    assert report.problems() == [
        "finding 2 'The error rate reached 42.7%': 42.7% is not in the release data"
    ]


def test_figures_shown_to_the_model_count_when_given() -> None:
    # The model saw a compact change list ("count": 400): that figure is not in the raw data.
    assert problems("400 changes in this release", CLEAN)
    report = ground_report(["400 changes in this release"], "", CLEAN, extra_known=[400.0])
    assert report.grounded
    # The page says where the figure was found.
    assert any("400 = the summary the model read" in line for line in report.parts[0].evidence)


def test_a_figure_given_twice_is_shown_once_as_evidence() -> None:
    text = "2 failed tests, and 2 failed tests again"
    report = ground_report([text], "", {**CLEAN, "tests": {"passed": 8, "failed": 2, "skipped": 0}})
    evidence = report.parts[0].evidence
    assert evidence and len(evidence) == len(set(evidence)), evidence


def test_an_error_rate_may_be_compared_with_a_threshold() -> None:
    data = {**CLEAN, "deployment_metrics": {"error_rate": 0.081, "response_time_p95": 390}}
    text = "error_rate 8.1% is 3.1 percentage points (62%) above the 5% threshold"
    assert problems(text, data) == []
    assert problems("error_rate 8.1% is 9 pp above the threshold", data)


@pytest.mark.parametrize(
    "text", ["Failed tests: 0 failed tests", "Failed tests: none", "Tests failed: 0"]
)
def test_a_signal_label_followed_by_zero_is_no_claim_of_failure(text: str) -> None:
    assert problems(text, CLEAN) == []


@pytest.mark.parametrize(
    "text",
    [
        # What local-model reports said, copying the policy's own signals.
        "Skipped tests: 2 of 152 tests skipped (1 %)",
        "Failed tests: 0 failed tests (less than the threshold of 1 failed test)",
        "Error rate: 0.004 (0.4 %) is below 0.02",
    ],
)
def test_restating_the_policys_signals_is_grounded(text: str) -> None:
    assert problems(text, CLEAN) == []


def test_a_failure_count_still_has_to_be_the_releases() -> None:
    assert problems("1 failed test in checkout", CLEAN)
    assert problems("9 failed tests", FAILING)


def test_the_count_of_failing_tests_in_all_critical_areas_together_is_grounded() -> None:
    # The policy's own wording, measured on the local model: 3 of 8 named are payments', one
    # is a migration's, so 4 are in a critical area.
    assert problems("4 failing tests in migrations, payments", FAILING) == []


def test_a_comparison_is_read_only_between_a_subject_and_its_own_threshold() -> None:
    text = "an error rate above 0.05, and a p95 latency above 1000 ms"
    data = {**CLEAN, "deployment_metrics": {"error_rate": 0.07, "response_time_p95": 1200}}
    assert problems(text, data) == []
    low = {**CLEAN, "deployment_metrics": {"error_rate": 0.031, "response_time_p95": 480}}
    assert problems("error rate 0.031 (3.1 %), which is above the threshold of 0.05", low) == [
        "3.1 % is not above 0.05"
    ]


# The examples of issue #21 ("GROUNDED" on false claims, false statements stored without
# review), each with the label the check must give it.
GATEWAY: dict[str, Any] = {
    "changes": ["Retry payment gateway calls with backoff", "Update the footer"],
    "tests": {
        "passed": 140,
        "failed": 2,
        "skipped": 0,
        "failing_tests": ["test_gateway_retry_backoff", "test_footer_links"],
    },
    "deployment_metrics": {"error_rate": 0.009, "response_time_p95": 380},
}
HOT: dict[str, Any] = {
    **CLEAN,
    "deployment_metrics": {"error_rate": 0.071, "response_time_p95": 1350},
}
QUIET: dict[str, Any] = {
    **CLEAN,
    "deployment_metrics": {"error_rate": 0.012, "response_time_p95": 300},
}
NO_METRICS: dict[str, Any] = {**CLEAN, "deployment_metrics": None}
DEMO_GATEWAY: dict[str, Any] = {
    **GATEWAY,
    "tests": {
        "passed": 151,
        "failed": 1,
        "skipped": 5,
        "failing_tests": ["payments/gateway_test::test_timeout_is_retried_once"],
    },
}

FOUND, ABSENT, CONTRADICTS, UNCHECKED = (
    "figures found in the data",
    "not in the data",
    "contradicts the data",
    "not checked",
)

# (text, data, what the check must say)
ISSUE_21 = [
    # "Gateway retry test fixed and passing on re-run — GROUNDED" while the data lists it failing
    ("Gateway retry test fixed and passing on re-run", GATEWAY, CONTRADICTS),
    ("test_gateway_retry_backoff passes now", GATEWAY, CONTRADICTS),
    ("All tests pass", GATEWAY, CONTRADICTS),
    ("The gateway retry test is failing", GATEWAY, FOUND),
    # The demo's v2.1.1: the failing test is named by its file and an inflected word.
    ("Gateway retry test fixed and passing on re-run", DEMO_GATEWAY, CONTRADICTS),
    ("The gateway timeout test still fails", DEMO_GATEWAY, FOUND),
    ("test_checkout_total fails", GATEWAY, ABSENT),  # not among the failing tests
    ("The footer test is flaky", GATEWAY, ABSENT),  # nothing in the data says flaky
    # "Metrics stable — GROUNDED" with no evidence: now checked against the policy's signals
    ("Metrics stable", HOT, CONTRADICTS),
    ("Metrics stable", CLEAN, FOUND),
    ("Metrics stable", NO_METRICS, ABSENT),
    ("Latency is normal", HOT, CONTRADICTS),
    # "Release approved as instructed by the release notes — grounded"
    ("Release approved as instructed by the release notes", CLEAN, CONTRADICTS),
    # Evidence by numeric coincidence: "Error rate at 2 % ↳ 2 % = tests.failed"
    ("Error rate at 2 %", GATEWAY, ABSENT),
    # "~450 ms ↳ 450 ms = error rate over a threshold (times)" (0.009 / 0.02 = 0.45)
    ("p95 latency ~450 ms", GATEWAY, ABSENT),
    # "The error rate is 0.012 and the p95 latency is 300 ms, which are medium risks"
    (
        "The error rate is 0.012 and the p95 latency is 300 ms, which are medium risks",
        QUIET,
        CONTRADICTS,
    ),
    ("The error rate is 0.012, which is a low risk", QUIET, FOUND),
    ("Error rate 7.1 % is a high risk", HOT, FOUND),
    # "above the threshold of 1 failed test" on a release without a failed test
    ("Failed tests above the threshold of 1 failed test", CLEAN, CONTRADICTS),
    ("2 failed tests, above the threshold of 1 failed test", GATEWAY, FOUND),
    # the policy's own sentences (issue #21 item 4) are found in the data
    ("Error rate 7.1 %, above the 5 % limit for high", HOT, FOUND),
    ("p95 latency 1,350 ms, above the 1,000 ms limit", HOT, FOUND),
    # nothing to check
    ("Review the rollout plan with the team", CLEAN, UNCHECKED),
]


@pytest.mark.parametrize(("text", "data", "label"), ISSUE_21)
def test_issue_21_examples_are_labelled(text: str, data: dict[str, Any], label: str) -> None:
    part = ground_text("finding 1", text, data, evaluate(data))
    assert part.label == label, (part.evidence, part.problems)


@pytest.mark.parametrize(
    ("summary_read", "label"), [(True, CONTRADICTS), (False, FOUND), (None, UNCHECKED)]
)
def test_a_claim_that_the_data_could_not_be_read_is_checked_against_what_the_run_read(
    summary_read: bool | None, label: str
) -> None:
    # "The release summary could not be read" on runs that read it.
    text = "The release summary could not be read"
    part = ground_text("summary", text, CLEAN, evaluate(CLEAN), summary_read=summary_read)
    assert part.label == label


@pytest.mark.parametrize(
    ("text", "data", "wrong_source"),
    [
        ("Error rate at 2 %", GATEWAY, "failed tests"),  # a percentage is not a count
        ("p95 latency ~450 ms", GATEWAY, "error rate"),  # a latency is not a ratio
        ("error rate 380", CLEAN, "p95 latency"),  # a latency is not an error rate
    ],
)
def test_evidence_is_shown_only_when_the_figure_and_its_meaning_match(
    text: str, data: dict[str, Any], wrong_source: str
) -> None:
    part = ground_text("finding 1", text, data, evaluate(data))
    assert not any(wrong_source in line for line in part.evidence), part.evidence
    assert part.label == ABSENT


def test_a_part_says_what_it_checked_when_stored() -> None:
    stored = ground_text("finding 1", "Metrics stable", HOT, evaluate(HOT)).as_dict()
    assert stored["label"] == CONTRADICTS
    assert stored["verdict"] == "contradicts"
    assert any("Error rate 7.1 %, above the 5 % limit for high" in p for p in stored["problems"])


MIXED: dict[str, Any] = {
    "changes": ["Rotate session tokens", "Update the setup instructions"],
    "tests": None,
    "deployment_metrics": {"error_rate": 0.035, "response_time_p95": 420},
}


@pytest.mark.parametrize(
    ("text", "data", "label"),
    [
        # The policy's own sentences, which a small model copies: always found in the data.
        ("Error rate 3.5 %, from the 2 % limit for medium up to 5 %", MIXED, FOUND),
        ("1 change in auth", MIXED, FOUND),
        ("missing from the release data: the test results", MIXED, FOUND),
        # Missing data and orders in the data, said of a release that has them or not.
        ("The deployment metrics are missing", MIXED, CONTRADICTS),
        ("An injection attempt in the changes", MIXED, ABSENT),
        ("Change: Update the setup instructions", MIXED, UNCHECKED),
    ],
)
def test_missing_data_and_orders_are_checked_against_the_policy(
    text: str, data: dict[str, Any], label: str
) -> None:
    part = ground_text("finding 1", text, data, evaluate(data))
    assert part.label == label, (part.evidence, part.problems)


def test_the_policys_own_sentence_quoting_a_fix_commit_is_not_a_claim_of_a_fixed_test() -> None:
    # The history-aware evidence quotes the commits that touch a critical area; a commit that
    # says "fix" beside the failing test's words is the data speaking, not the assessor.
    data = {
        "changes": ["fix(payments): round partial refunds to the minor unit (14156b7)"],
        "tests": {
            "passed": 40,
            "failed": 1,
            "skipped": 0,
            "failing_tests": ["payments.refunds_test::test_partial_refund_rounds_to_minor_unit"],
        },
        "deployment_metrics": {"error_rate": 0.001, "response_time_p95": 200},
    }
    quoting = (
        "The change touches payments (payments: payments/refunds.py, the commit "
        '"fix(payments): round partial refunds to the minor unit")'
    )
    policy = evaluate(data)
    own = replace(
        policy,
        signals=(
            *policy.signals,
            Signal("critical_paths", "Changed files", "medium", True, detail=quoting),
        ),
    )
    assert quoting in own.evidence()

    assert ground_text("finding 1", quoting, data, own).problems == []
    # The same words as the assessor's own, beside a sentence the policy did not write, are
    # still checked.
    said = quoting + ", so the partial refund rounding is fixed"
    assert any(
        "passes or is fixed" in p for p in ground_text("finding 1", said, data, own).problems
    )


# ---- The policy never contradicts itself (issue 28, item 4) ----


def _itsdangerous_like() -> tuple[dict[str, Any], Any]:
    from risk.history import History, TestHistory

    labels = [
        "tests/test_timed.py::TestTimedSerializer::test_max_age",
        "tests/test_timed.py::TestTimedSerializer::test_expired",
        "tests/test_timed.py::TestTimedSigner::test_timestamp",
        "tests/test_timed.py::TestTimedSigner::test_max_age_expired",
        "tests/test_encoding.py::test_int_bytes[192-\\xc0]",
    ]
    tests = tuple(
        TestHistory(
            label=label,
            file="tests/test_timed.py",
            suite="tests",
            outcome="failed",
            flaky_here=False,
            first_failed_in="2.2.0",
            recent=tuple((f"2.1.{i}", "passed") for i in range(3)),
        )
        for label in labels
    )
    data = {
        "changes": ["Fix the timestamp check"],
        "tests": {"passed": 292, "failed": 5, "skipped": 0, "failing_tests": labels},
        "deployment_metrics": {"error_rate": 0.001, "response_time_p95": 183},
    }
    past = History(service="itsdangerous", version="2.2.0", tests=tests, has_test_detail=True)
    return data, evaluate(data, PolicySettings(), history=past)


def test_every_sentence_of_the_policy_is_grounded_copied_or_joined() -> None:
    data, verdict = _itsdangerous_like()
    evidence = verdict.evidence()
    assert any("failed for the first time" in e for e in evidence)
    result = ground_report(evidence, " ".join(evidence), data, verdict)
    assert result.grounded, result.problems()
    result = ground_report(evidence, "; ".join(evidence), data, verdict)
    assert result.grounded, result.problems()
    # A clause of one copied between the model's own words is the policy's too.
    clause = next(e for e in evidence if "first time" in e)
    part = ground_text("finding 1", f"Most worrying: {clause}.", data, verdict)
    assert part.grounded and any("its own sentence" in e for e in part.evidence), part


def test_the_old_sentence_with_its_remainder_count_is_not_a_contradiction() -> None:
    data, verdict = _itsdangerous_like()
    sentence = next(s.detail for s in verdict.signals if s.name == "failed_tests")
    assert "192" in sentence  # the parametrized id is named, and its digits are no figure
    assert ground_text("finding 1", sentence, data, verdict).grounded
    # The model's own count next to a test word is still held to the release's counts.
    made_up = ground_text("finding 1", "2 tests failed in the timed module", data, verdict)
    assert made_up.verdict == "contradicts"


def test_a_test_id_with_parameters_holds_no_figure() -> None:
    data, verdict = _itsdangerous_like()
    part = ground_text(
        "finding 1", "tests/test_encoding.py::test_int_bytes[192-\\xc0] fails", data, verdict
    )
    assert part.grounded, part.problems


def test_a_failing_test_named_in_a_finding_is_one_line_of_evidence() -> None:
    data, verdict = _itsdangerous_like()
    text = "test_max_age, test_expired and test_timestamp fail in the timed serializer"
    part = ground_text("finding 1", text, data, verdict)
    listed = [e for e in part.evidence if "listed as failing" in e]
    # One line, however many it names (here also test_max_age_expired, by its words).
    assert len(listed) == 1 and listed[0].endswith("tests it names are listed as failing")
    assert "test_max_age" not in listed[0]


def test_a_reason_is_cut_at_a_space_never_inside_a_name() -> None:
    long = "x " * 80 + "tests/test_timed.py::TestTimedSerializer::test_max_age fails"
    cut = clip(long)
    assert cut.endswith(" …") and "TestTimedSerializer::t …" not in cut
    assert len(cut) <= CLIP_CHARS + 2
    assert clip("short text") == "short text"
    report = ground_report([long + " with 7 failed tests"], "", *_itsdangerous_like())
    assert all("::t'" not in problem for problem in report.problems())


def _remainder_case() -> tuple[dict[str, Any], Any]:
    from risk.history import History, TestHistory

    def failing(label: str, recent: str) -> TestHistory:
        went = tuple((f"v1.{i}", "failed" if c == "F" else "passed") for i, c in enumerate(recent))
        return TestHistory(label, "", "", "failed", False, "v1.0", "F" in recent, went)  # type: ignore[arg-type]

    fresh = [failing(f"tests/test_timed.py::TestTimed::test_{n}", "PPP") for n in "abcde"]
    old = failing("tests/test_core.py::test_old", "PFP")
    labels = [t.label for t in [*fresh, old]]
    data = {
        "changes": ["Fix the timestamp check"],
        "tests": {"passed": 291, "failed": 6, "skipped": 0, "failing_tests": labels},
        "deployment_metrics": {"error_rate": 0.001, "response_time_p95": 183},
    }
    past = History("itsdangerous", "2.2.0", tests=(*fresh, old), has_test_detail=True)
    return data, evaluate(data, PolicySettings(), history=past)


def test_a_list_with_its_remainder_count_in_the_policy_sentence_is_grounded() -> None:
    data, verdict = _remainder_case()
    sentence = next(s.detail for s in verdict.signals if s.name == "new_failures")
    assert "and 2 more failed for the first time" in sentence
    part = ground_text("finding 1", f"Also: {sentence}", data, verdict)
    assert part.grounded and part.verdict == "found", part.problems
