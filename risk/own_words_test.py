from __future__ import annotations

from risk.own_words import own_findings, own_share, own_words

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


def test_own_words_say_how_much_of_the_report_is_the_models_and_how_much_holds() -> None:
    own = "test_login fails since the session change, which reads the new token column."
    wrong = "The error rate of 12 % is far above the limit."
    grounding = [
        {"text": POLICY[0], "verdict": "found"},
        {"text": own, "verdict": "unchecked"},
        {"text": wrong, "verdict": "contradicts"},
    ]
    said = own_words([POLICY[0], own], wrong, POLICY, grounding)
    assert said.own == (own, wrong)
    assert said.share == (len(own) + len(wrong)) / (len(POLICY[0]) + len(own) + len(wrong))
    assert said.held == 0.0
    assert said.unchecked == len(own) / (len(own) + len(wrong))
    # A summary that holds counts as held; the policy's sentences never count as the model's.
    right = "One failed test, in auth: test_login."
    held = own_words([POLICY[0]], right, POLICY, [{"text": right, "verdict": "found"}])
    assert held.own == (right,) and held.held == 1.0 and held.unchecked == 0.0


def test_a_report_of_the_policys_sentences_has_no_own_words_to_hold() -> None:
    copied = own_words([POLICY[0]], "", POLICY, [{"text": POLICY[0], "verdict": "found"}])
    assert copied.share == 0.0 and copied.held is None and copied.own == ()
    assert own_words([], " ", POLICY).share is None
