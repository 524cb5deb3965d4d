"""Where a parent's lines stand after a commit's hunks (`git log -p -U0`'s numbers)."""

from __future__ import annotations

from dataclasses import dataclass

from risk.line_carry import Cuts


@dataclass(frozen=True)
class H:
    old_start: int
    old_count: int
    new_start: int
    new_count: int


def test_lines_move_with_the_lines_added_and_removed_above_them() -> None:
    cuts = Cuts([H(2, 0, 3, 2), H(10, 3, 12, 1)])  # 2 lines added after line 2; 10..12 -> 1
    assert cuts.carry(1, 1) == [(1, 1)]  # above every hunk
    assert cuts.carry(5, 6) == [(7, 8)]  # below the insertion: 2 down
    assert cuts.carry(20, 20) == [(20, 20)]  # below both: +2 - 2


def test_removed_lines_go_and_a_range_across_them_splits() -> None:
    cuts = Cuts([H(4, 2, 3, 0)])  # lines 4 and 5 removed
    assert cuts.carry(4, 5) == []
    assert cuts.carry(3, 7) == [(3, 3), (4, 5)]


def test_many_hunks_are_searched_not_scanned() -> None:
    # A generated table rewritten line by line: 5,000 hunks, each range found by bisection.
    cuts = Cuts([H(n, 1, n, 1) for n in range(1, 10_000, 2)])
    assert cuts.carry(2, 2) == [(2, 2)]
    assert cuts.carry(1, 3) == [(2, 2)]
