from __future__ import annotations

import pytest

from agent.context.budget import history_budget, margin_tokens


@pytest.mark.parametrize(
    ("window", "system", "response", "margin", "expected"),
    [
        (200_000, 1_000, 4_096, 0.10, 200_000 - 1_000 - 4_096 - 20_000),
        (8_192, 500, 1_024, 0.10, 8_192 - 500 - 1_024 - 820),  # the margin rounds up
        (8_192, 0, 0, 0.0, 8_192),
        (8_192, 6_000, 4_096, 0.10, 0),  # never negative
    ],
)
def test_the_budget_is_window_minus_system_response_and_margin(
    window: int, system: int, response: int, margin: float, expected: int
) -> None:
    assert history_budget(window, system, response, margin) == expected


def test_the_default_margin_is_ten_percent() -> None:
    assert history_budget(10_000, 0, 0) == 9_000
    assert margin_tokens(10_000) == 1_000


@pytest.mark.parametrize(
    ("window", "system", "response", "margin"),
    [(0, 0, 0, 0.1), (100, -1, 0, 0.1), (100, 0, -1, 0.1), (100, 0, 0, 1.0), (100, 0, 0, -0.1)],
)
def test_impossible_inputs_are_refused(
    window: int, system: int, response: int, margin: float
) -> None:
    with pytest.raises(ValueError):
        history_budget(window, system, response, margin)
