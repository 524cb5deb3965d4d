"""The suspects' signal: the sentence the evidence carries, grounded as it is, and the raise
that only a suspect's changed path in a critical area gives."""

from __future__ import annotations

from dataclasses import replace

from risk.grounding import ground_report
from risk.history_signals_test import history, names, summary, test_history
from risk.policy import evaluate
from risk.suspect_signals import suspect_sentence
from risk.suspects import ON_PATH, UNDER_TEST, Suspect

MAX_AGE = "tests.test_timed.TestTimed::test_max_age"
SHA = "3f2c1e9" + "0" * 33
ON_LINE = Suspect(
    SHA, "Add a second of grace to max_age", "Mira Holt", ON_PATH,
    "src/itsdangerous/timed.py", 141, 0, "src/itsdangerous/timed.py line 141 runs through ...",
)  # fmt: skip
IN_PAYMENTS = Suspect(
    SHA, "Round refunds to the cent", "Mira Holt", UNDER_TEST, "src/payments/refund.py",
    None, None, f"{SHA[:7]} 'Round refunds to the cent' changed src/payments/refund.py, which "
    "tests/test_refund.py exercises",
)  # fmt: skip


def test_the_sentence_names_the_file_line_commit_and_author() -> None:
    assert suspect_sentence(test_history(MAX_AGE), ON_LINE) == (
        "test_max_age fails in src/itsdangerous/timed.py line 141, a line changed by 3f2c1e9 "
        "'Add a second of grace to max_age' (Mira Holt)"
    )
    near = replace(ON_LINE, distance=3)
    assert "3 lines from a change by 3f2c1e9" in suspect_sentence(test_history(MAX_AGE), near)


def test_a_new_failures_suspect_is_cited_and_the_report_citing_it_is_grounded() -> None:
    failing = test_history(MAX_AGE)
    failing = replace(failing, suspects=(ON_LINE,))
    data = summary(MAX_AGE)
    verdict = evaluate(data, history=history(failing))
    sentence = suspect_sentence(failing, ON_LINE)
    assert sentence in verdict.evidence()
    assert names(verdict)["failure_suspects"] == "none"  # evidence; the raise is elsewhere
    assert "suspect_in_critical_area" not in names(verdict)
    report = ground_report([sentence], "", data, verdict)
    assert report.problems() == []


def test_a_suspect_in_a_critical_path_raises_and_a_flaky_failure_without_one_does_not() -> None:
    refund = replace(test_history("tests.test_refund::test_partial"), suspects=(IN_PAYMENTS,))
    raised = evaluate(summary(refund.label), history=history(refund))
    assert names(raised)["suspect_in_critical_area"] == "high"
    assert raised.severity == "high"

    # Known flaky (failed on and off), no suspect: neither cited nor raised by the suspects.
    flaky = test_history("tests.test_refund::test_partial", recent="KPFP")
    calm = evaluate(summary(flaky.label), history=history(flaky))
    assert "suspect_in_critical_area" not in names(calm)
    assert "failure_suspects" not in names(calm)
    # The same flaky test with a suspect is still not a new failure: no raise from it.
    flaky_suspected = replace(flaky, suspects=(IN_PAYMENTS,))
    still = evaluate(summary(flaky.label), history=history(flaky_suspected))
    assert "suspect_in_critical_area" not in names(still)
