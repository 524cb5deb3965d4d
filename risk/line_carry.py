"""Where a commit's parent's lines stand after its hunks (`git log -p -U0`'s numbers): the step
`risk.suspects.lines_at_head` repeats from the range's oldest commit to its newest, so every
commit's changed lines are compared with frames in the head's numbering."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Protocol

__all__ = ["Cuts"]


class HunkLike(Protocol):
    old_start: int
    old_count: int
    new_start: int
    new_count: int


class Cuts:
    """A commit's hunks in the parent's numbering: the removed line spans, and from which line
    on how far the lines move; searched by bisection, as a file rewritten by many commits
    (idna's generated tables) carries thousands of ranges through thousands of hunks."""

    def __init__(self, hunks: Sequence[HunkLike]) -> None:
        self.removed_starts: list[int] = []
        self.removed_ends: list[int] = []
        self.shift_at: list[int] = []
        self.shift_by: list[int] = []
        shift = 0
        for hunk in sorted(hunks, key=lambda h: h.old_start):
            if hunk.old_count:
                self.removed_starts.append(hunk.old_start)
                self.removed_ends.append(hunk.old_start + hunk.old_count - 1)
            shift += hunk.new_count - hunk.old_count
            self.shift_at.append(hunk.old_start + max(hunk.old_count, 1))
            self.shift_by.append(shift)

    def carry(self, start: int, end: int) -> list[tuple[int, int]]:
        """Where lines `start`..`end` of the parent stand after the hunks; removed ones go."""
        starts, ends, at = self.removed_starts, self.removed_ends, self.shift_at
        breaks = {start}
        breaks.update(at[bisect_right(at, start) : bisect_right(at, end)])
        breaks.update(starts[bisect_right(starts, start) : bisect_right(starts, end)])
        breaks.update(e + 1 for e in ends[bisect_left(ends, start) : bisect_left(ends, end)])
        ordered = sorted(breaks)
        out: list[tuple[int, int]] = []
        for index, first in enumerate(ordered):
            last = ordered[index + 1] - 1 if index + 1 < len(ordered) else end
            cut = bisect_right(starts, first) - 1
            if cut >= 0 and ends[cut] >= first:
                continue
            moved = bisect_right(at, first) - 1
            shift = self.shift_by[moved] if moved >= 0 else 0
            out.append((first + shift, last + shift))
        return out
