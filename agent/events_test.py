from __future__ import annotations

import json
import math
from typing import Any

import pytest

from agent.events import (
    ContextTrimmed,
    ModelResponded,
    RetryScheduled,
    UsageReported,
    dump_event,
    parse_event,
)
from agent.messages import Usage


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_required_figure_that_is_not_finite_is_saved_as_zero(bad: float) -> None:
    event = RetryScheduled(attempt=1, max_attempts=3, delay_s=bad, reason="429", error_type="x")
    dumped = dump_event(event)
    assert dumped["delay_s"] == 0.0
    json.dumps(dumped, allow_nan=False)
    assert parse_event(dumped) == event


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_an_optional_figure_that_is_not_finite_is_saved_as_missing(bad: float) -> None:
    usage = Usage(input_tokens=1, output_tokens=1)
    event = UsageReported(step=1, usage=usage, total=usage, estimated_cost_usd=bad)
    assert dump_event(event)["estimated_cost_usd"] is None


def test_finite_figures_are_kept() -> None:
    event = RetryScheduled(attempt=1, max_attempts=3, delay_s=1.5, reason="429", error_type="x")
    assert dump_event(event)["delay_s"] == 1.5


@pytest.mark.parametrize(
    ("event", "field", "saved"),
    [
        (
            ModelResponded(step=1, text="", tool_call_count=0, duration_ms=math.nan),
            "duration_ms",
            None,
        ),
        (
            ContextTrimmed(
                strategy="truncation",
                messages_before=3,
                messages_after=2,
                tokens_before=10,
                tokens_after=5,
                budget=8,
                utilisation=math.inf,
            ),
            "utilisation",
            0.0,
        ),
    ],
)
def test_every_figure_of_every_event_is_finite(event: Any, field: str, saved: float | None) -> None:
    assert dump_event(event)[field] == saved
