from __future__ import annotations

from evals.evaluators.matching import find_group, matches_phrase
from evals.scenario import KeywordGroup


def test_phrases_match_tolerantly() -> None:
    assert matches_phrase("2 tests failed in checkout", "test failures")
    assert matches_phrase("FAILING TESTS: test_x", "failed test")
    assert matches_phrase("the Authentication flow", "auth")
    assert matches_phrase("error-rate is elevated", "error rate")
    assert matches_phrase("No test results were provided", "test results missing") is False
    assert matches_phrase("No test results were provided", "no test")
    assert not matches_phrase("all green", "test failures")


def test_forbidden_claims_ignore_negated_mentions() -> None:
    group = KeywordGroup(name="claim", any_of=["all tests passed"])
    assert find_group("All tests passed.", group, skip_negated=True)
    assert not find_group("We cannot confirm all tests passed.", group, skip_negated=True)
    assert not find_group("It is unknown whether all tests passed", group, skip_negated=True)
