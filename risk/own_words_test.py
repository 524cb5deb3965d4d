from __future__ import annotations

from risk.own_words import own_findings, own_share

POLICY = [
    "Error rate 9 %, above the 5 % limit for high",
    "1 failed test: test_login; 1 change in auth",
]


def test_the_policys_sentences_copied_or_joined_are_not_the_models_own() -> None:
    copied = ["error rate 9 %, above the 5 % limit for high.", "1 change in auth"]
    assert own_findings(copied, POLICY) == []
    assert own_share(copied, POLICY) == 0.0


def test_a_finding_with_words_of_its_own_is_the_models() -> None:
    own = "test_login fails since the session change, which reads the new token column."
    findings = [POLICY[0], own]
    assert own_findings(findings, POLICY) == [own]
    share = own_share(findings, POLICY)
    assert share is not None and 0.5 < share < 1


def test_no_findings_have_no_share() -> None:
    assert own_share([], POLICY) is None
