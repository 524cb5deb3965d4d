from __future__ import annotations

from datetime import date

from releases.trend import HEIGHT, weekly_trend

TODAY = date(2026, 11, 25)  # a Wednesday: its week starts on Monday the 23rd


def test_every_week_is_drawn_oldest_first_and_stacks_fill_the_peak() -> None:
    rows = [
        (date(2026, 11, 23), "high", 2),
        (date(2026, 11, 24), "low", 2),  # same week, another day
        (date(2026, 11, 16), "medium", 1),
        (date(2026, 1, 5), "high", 9),  # long before the window: left out
    ]
    trend = weekly_trend(rows, today=TODAY, weeks=4)
    assert [bar.start for bar in trend.bars] == [
        date(2026, 11, 2),
        date(2026, 11, 9),
        date(2026, 11, 16),
        date(2026, 11, 23),
    ]
    assert trend.peak == 4 and trend.total == 5
    last = trend.bars[-1]
    # High sits at the bottom; the tallest week reaches the top.
    assert [(s.severity, s.height) for s in last.segments] == [
        ("high", HEIGHT / 2),
        ("low", HEIGHT / 2),
    ]
    assert last.segments[-1].y == 0
    assert trend.bars[2].segments[0].height == HEIGHT / 4
    assert trend.bars[0].segments == [] and trend.bars[0].label == "Week of Nov 2: no reports"
    assert last.label == "Week of Nov 23: 2 high, 2 low"


def test_no_reports_draws_empty_weeks() -> None:
    trend = weekly_trend([], today=TODAY)
    assert len(trend.bars) == 12 and trend.peak == 0
    assert all(not bar.segments for bar in trend.bars)
