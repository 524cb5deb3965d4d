"""A medium on missing data alone, told from one the release's own data shows."""

from __future__ import annotations

from typing import Any

from releases.missing_data import rests_on_missing_data


def signal(name: str, level: str, *, critical: bool = False) -> dict[str, Any]:
    return {"name": name, "level": level, "critical": critical}


def test_a_medium_of_missing_fields_alone_rests_on_missing_data() -> None:
    signals = [
        signal("missing_deployment_metrics", "medium"),
        signal("missing_changes", "medium"),
        signal("change_size", "low"),
    ]
    assert rests_on_missing_data("medium", signals)


def test_a_medium_the_data_shows_does_not() -> None:
    shown = [signal("missing_deployment_metrics", "medium"), signal("new_failures", "medium")]
    assert not rests_on_missing_data("medium", shown)
    # A high that is not critical counts as medium, and it is the release's own.
    assert not rests_on_missing_data("medium", [signal("risky_changes", "high")])


def test_only_a_medium_and_only_with_a_missing_field() -> None:
    missing = [signal("missing_tests", "medium")]
    assert not rests_on_missing_data("high", missing)
    assert not rests_on_missing_data("low", missing)
    assert not rests_on_missing_data(None, missing)
    # The model's medium with nothing at medium in the policy: the model saw something.
    assert not rests_on_missing_data("medium", [signal("change_size", "low")])
    assert not rests_on_missing_data("medium", [])
