"""Figures in text: units, spellings, precision, and what is not a figure."""

from __future__ import annotations

import pytest

from risk.figures import extract_figures, numbers_in


def values(text: str) -> list[tuple[float, str]]:
    return [(f.value, f.unit) for f in extract_figures(text)]


def matches(text: str, known: list[float]) -> list[bool]:
    return [f.matches(known) for f in extract_figures(text)]


def test_figures_are_read_with_their_units() -> None:
    assert values("error rate 5% (0.05), p95 450ms or 0.45 s") == [
        (5.0, "%"),
        (0.05, ""),
        (450.0, "ms"),
        (0.45, "s"),
    ]
    assert values("5.0 percent and 12,000 requests") == [(5.0, "%"), (12000.0, "")]
    assert values("rate was 0.05.") == [(0.05, "")]


def test_versions_and_identifiers_are_not_figures() -> None:
    assert values("release v2.1.0 (2.1.0) after v3") == []
    assert values("p95, test_auth_2fa, OAuth2, PAY-123, #42, 3x, 1.5x") == []


@pytest.mark.parametrize("text", ["5%", "5.0%", "0.05", "5 percent", "error rate 5.00 %", "~5 %"])
def test_one_value_in_many_spellings(text: str) -> None:
    assert matches(text, [0.05]) == [True]


@pytest.mark.parametrize("text", ["6%", "0.06", "5.2%", "0.051", "4.98%"])
def test_a_different_value_does_not_match(text: str) -> None:
    assert matches(text, [0.05]) == [False]


def test_a_rounded_figure_matches_the_precise_value() -> None:
    assert matches("5%, 5.2% and 0.052", [0.0523]) == [True, True, True]
    assert matches("5.3%", [0.0523]) == [False]


def test_durations_match_across_units() -> None:
    assert matches("p95 450ms, 0.45s, 450 milliseconds", [450.0]) == [True, True, True]
    assert matches("p95 500ms", [450.0]) == [False]


def test_numbers_in_data_include_those_inside_its_strings() -> None:
    data = {"a": 1, "b": [0.5, "Raise the timeout to 30 s"], "c": None, "d": True}
    assert numbers_in(data) == [1.0, 0.5, 30.0, 30000.0]
