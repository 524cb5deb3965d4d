"""The change-size rule of a service without enough releases of its own (risk/change_signals.py,
decision 2026-11-27-change-size-without-history)."""

from __future__ import annotations

import pytest

from risk.change_signals import change_signals
from risk.history import ChangeFacts, FileChange
from risk.settings import PolicySettings
from risk.signal import Signal

CFG = PolicySettings()


def facts(
    lines: int, earlier: tuple[tuple[int, int, int], ...] = (), files: int = 1
) -> ChangeFacts:
    made = tuple(
        FileChange(f"src/pkg/m{i}.py", lines // files + (lines % files if i == 0 else 0), 0)
        for i in range(files)
    )
    return ChangeFacts(commits=3, files=made, earlier_code_sizes=earlier)


def size(changes: ChangeFacts, cfg: PolicySettings = CFG) -> Signal:
    return next(s for s in change_signals(changes, cfg) if s.name == "change_size")


@pytest.mark.parametrize(
    ("lines", "earlier", "level"),
    [
        # No earlier release: said from the fixed 1,000 lines, large from 4,000.
        (999, (), "none"),
        (1000, (), "low"),
        (3999, (), "low"),
        (4000, (), "medium"),
        # Fewer than 10 earlier releases are too few (large_change_history_releases): the
        # young-service rule, its limits raised where the releases it has are larger still.
        (1505, ((382, 12, 1),), "low"),
        (4000, ((382, 12, 1),), "medium"),
        (802, ((1505, 20, 1), (382, 12, 1)), "none"),
        # markupsafe's two patch releases before a 1,200-line one no longer make it medium
        # (itsdangerous 2.2.0, 611 lines after 20 and 7, was medium so).
        (1200, ((115, 2, 1), (47, 2, 1)), "low"),
        (611, ((7, 1, 1), (20, 2, 1)), "none"),
        # Two releases of 13,000 lines make 5,000 usual (commons-lang), not large.
        (5000, ((13466, 90, 12), (12958, 80, 12)), "none"),
        # Ten: the service's own size, whatever the fixed numbers say.
        (1200, ((115, 2, 1), (47, 2, 1)) * 5, "medium"),
        (802, ((1505, 20, 1), (382, 12, 1)) * 5, "none"),
    ],
)
def test_a_young_service_is_judged_by_a_higher_line_count(
    lines: int, earlier: tuple[tuple[int, int, int], ...], level: str
) -> None:
    assert size(facts(lines, earlier)).level == level


def test_the_sentence_says_why_a_young_services_size_is_not_raised() -> None:
    said = size(facts(1505, ((382, 12, 1),)))
    assert said.detail.endswith(
        "; 1,505 lines of code, at or above the 1,000 that make a change large for a service "
        "with a history of its own, but the service has 1 earlier release, too few to judge its "
        "size against: large from 4,000"
    )
    assert said.threshold == (
        # The files' limit is its one release's 12 files three times over, above the fixed 30.
        "medium: lines of code from 4,000, code files from 36, directories from 10 (the service "
        "has 1 earlier release, too few to judge its size against); low from 1,000 lines of code"
    )
    large = size(facts(6382))
    assert large.detail.endswith(
        "; 6,382 lines of code, at or above the 4,000 that make a change large (the service has "
        "no earlier release, too few to judge its size against)"
    )


def test_files_and_directories_keep_their_fixed_numbers_without_history() -> None:
    # 30 files of 10 lines: 300 lines, spread wide; a reviewer reads 30 files whatever the past.
    spread = size(facts(300, files=30))
    assert spread.level == "medium"
    assert "30 code files, at or above the 30 that make a change large" in spread.detail


def test_the_settings_decide_both_numbers_and_the_level() -> None:
    # Unset (or no higher than the fixed number): the fixed 1,000 lines are large, as before.
    old = PolicySettings(large_change_without_history_lines_at_or_above=None)
    assert size(facts(1000), old).level == "medium"
    assert "low from" not in size(facts(1000), old).threshold
    same = PolicySettings(large_change_without_history_lines_at_or_above=1000)
    assert size(facts(1000), same).level == "medium"
    # A site that wants the unjudged size silent, or raised.
    silent = PolicySettings(large_change_without_history_level="none")
    assert size(facts(2500), silent).level == "none"
    stricter = PolicySettings(
        large_change_without_history_lines_at_or_above=2000, large_change_history_releases=3
    )
    assert size(facts(2000, ((100, 2, 1), (90, 2, 1))), stricter).level == "medium"
    assert size(facts(1999, ((100, 2, 1), (90, 2, 1))), stricter).level == "low"


def test_a_policy_stored_before_the_setting_reads_its_default() -> None:
    stored = CFG.model_dump()
    del stored["large_change_without_history_lines_at_or_above"]
    del stored["large_change_without_history_level"]
    assert size(facts(2500), PolicySettings(**stored)).level == "low"
