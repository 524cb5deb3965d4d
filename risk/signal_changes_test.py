"""What changed between two reports' signals."""

from __future__ import annotations

from risk.signal_changes import MOST_CHANGES, changes_between


def signal(name: str, level: str, figure: object) -> dict[str, object]:
    return {
        "name": name,
        "label": name.replace("_", " ").capitalize(),
        "level": level,
        "figure": figure,
    }


def test_moved_new_and_gone_signals_are_said_and_still_ones_are_not() -> None:
    earlier = [
        signal("failed_tests", "none", 0),
        signal("error_rate", "none", 0.0012),
        signal("p95_latency", "none", 410.0),
        signal("new_authors", "low", 1),
    ]
    now = [
        signal("failed_tests", "medium", 5.0),
        signal("error_rate", "none", 0.0012),
        signal("p95_latency", "medium", 1840.5),
        signal("failure_suspects", "none", 5),
    ]
    lines, more = changes_between(earlier, now)
    assert lines == [
        "Failed tests: 0 → 5 (none → medium)",
        "P95 latency: 410 → 1840 (none → medium)",
        "Failure suspects: new (none)",
        "New authors: gone (was low)",
    ]
    assert more == 0


def test_the_same_signals_change_nothing_and_a_long_list_is_cut() -> None:
    same = [signal("failed_tests", "medium", 3)]
    assert changes_between(same, same) == ([], 0)
    many = [signal(f"s{n}", "low", n) for n in range(MOST_CHANGES + 3)]
    lines, more = changes_between([], many)
    assert len(lines) == MOST_CHANGES and more == 3
    assert changes_between([{"label": "no name"}, "junk"], []) == ([], 0)  # type: ignore[list-item]
