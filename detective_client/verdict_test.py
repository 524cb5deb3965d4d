"""The Markdown summary keeps a model's words as text."""

from __future__ import annotations

from detective_client.verdict import markdown


def test_findings_cannot_add_links_html_or_structure() -> None:
    verdict = {
        "version": "2.0.0",
        "state": "assessed",
        "severity": "low",
        "summary": "All fine.\n\n## Approved <img src=x onerror=alert(1)>",
        "findings": [
            {"text": "See [the fix](https://evil.example) | col", "evidence": ["`rm -rf` *x*"]}
        ],
    }
    text = markdown(verdict, "shop", "high")
    assert "[the fix](https" not in text
    assert r"See \[the fix\]\(https://evil.example\) \| col" in text
    assert r"\<img src=x onerror=alert\(1\)\>" in text
    assert "\n## Approved" not in text and r"\#\# Approved" in text
    assert r"evidence: \`rm -rf\` \*x\*" in text
    assert text.startswith("### ✅ Detective: shop 2.0.0\n")


def test_a_finding_the_policy_added_is_marked_as_the_policys() -> None:
    verdict = {
        "version": "2.0.0",
        "state": "assessed",
        "severity": "high",
        "findings": [
            {"text": "Error rate 9 %", "evidence": []},
            {"text": "12 failed tests", "evidence": [], "from_policy": True},
        ],
    }
    lines = markdown(verdict, "shop", "high").splitlines()
    assert "- Error rate 9 %" in lines
    assert "- 12 failed tests *(from the policy)*" in lines


def test_medium_known_fails_a_medium_the_data_shows_and_passes_one_on_missing_data() -> None:
    from detective_client.verdict import AT_OR_ABOVE, BELOW, exit_code

    shown = {"state": "assessed", "severity": "medium", "missing_data_only": False}
    missing = {**shown, "missing_data_only": True}
    unsaid = {"state": "assessed", "severity": "medium"}  # a server from before: every medium
    high = {"state": "assessed", "severity": "high", "missing_data_only": False}
    assert exit_code(shown, "medium-known") == AT_OR_ABOVE
    assert exit_code(missing, "medium-known") == BELOW
    assert exit_code(missing, "medium") == AT_OR_ABOVE
    assert exit_code(unsaid, "medium-known") == AT_OR_ABOVE
    assert exit_code(high, "medium-known") == AT_OR_ABOVE
    assert exit_code({**shown, "severity": "low"}, "medium-known") == BELOW
