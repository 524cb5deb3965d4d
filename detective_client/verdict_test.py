"""The gate's exit codes from a verdict (the summary's Markdown: summary_test.py)."""

from __future__ import annotations

from detective_client.verdict import AT_OR_ABOVE, BELOW, exit_code


def test_medium_known_fails_a_medium_the_data_shows_and_passes_one_on_missing_data() -> None:
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
