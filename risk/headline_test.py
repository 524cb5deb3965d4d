"""Why a severity, in one sentence."""

from __future__ import annotations

from risk.headline import why


def signal(label: str, level: str, figure: object = None, critical: bool = False) -> dict:
    return {"name": label, "label": label, "level": level, "figure": figure, "critical": critical}


def test_the_signals_that_set_the_severity_name_it_with_their_counts() -> None:
    signals = [
        signal("Failed tests", "medium", 5.0),
        signal("Error rate", "none", 0.001),
        signal("Missing: the deployment metrics", "medium"),
        signal("New authors", "low", 1),
    ]
    assert why(signals, "medium") == (
        "Medium from failed tests (5) and missing: the deployment metrics."
    )


def test_a_high_outside_a_critical_area_counts_as_medium_and_long_lists_are_cut() -> None:
    signals = [signal(f"Signal {n}", "high", 2) for n in range(5)]
    assert why(signals, "high") == "High: no signal of the policy's sets it (see the findings)."
    assert (
        why(signals, "medium") == "Medium from signal 0 (2), signal 1 (2), signal 2 (2) and 2 more."
    )
    critical = [signal("Error rate", "high", 0.09, critical=True)]
    assert why(critical, "high") == "High from error rate."


def test_low_without_a_signal_says_how_many_checks_found_nothing() -> None:
    assert why([signal("Failed tests", "none", 0)] * 7, "low") == (
        "No signal of risk in the policy's 7 checks."
    )
    assert why([], None) == ""
