from __future__ import annotations

import math
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from releases.schemas import (
    MAX_NUMBER,
    shape_problem,
    validate_changes,
    validate_deployment_metrics,
    validate_test_results,
)


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"a": math.nan}, "not a finite number"),
        ({"a": math.inf}, "not a finite number"),
        ({"a": 10**5000}, "larger than"),
        ({"a": MAX_NUMBER + 1}, "larger than"),
        (_deep(3000), "nested deeper"),
        (["\ud800"], "lone surrogate"),
        (["a\x00"], "NUL"),
        ({"\ud800": 1}, "a key"),
        (["x" * 2001], "longer than"),
        (["a"] * 5001, "more than 5,000 items"),
        ({"a": object()}, "not JSON"),
    ],
)
def test_shape_problems_are_found_without_recursing_or_encoding(value: Any, problem: str) -> None:
    found = shape_problem(value)
    assert found is not None and problem in found


@pytest.mark.parametrize("value", [None, [], {}, {"a": [1, 2.5, "x", None, True]}])
def test_plain_values_have_no_shape_problem(value: Any) -> None:
    assert shape_problem(value) is None


def test_an_unknown_metric_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValidationError) as error:
        validate_deployment_metrics({"p95_ms": 450, "error_rate": 0.1})
    message = error.value.messages[0]
    assert "'p95_ms'" in message and "response_time_p95" in message and "error_rate" in message


@pytest.mark.parametrize(
    ("validator", "value"),
    [
        (validate_deployment_metrics, {"error_rate": 1.01}),
        (validate_deployment_metrics, {"response_time_p95": 3_600_001}),
        (validate_deployment_metrics, {"cpu_utilization": -0.1}),
        (validate_test_results, {"passed": 10**10}),
        (validate_changes, [""]),
    ],
)
def test_figures_out_of_range_are_refused(validator: Any, value: Any) -> None:
    with pytest.raises(ValidationError):
        validator(value)


def test_real_figures_pass() -> None:
    validate_deployment_metrics(
        {"error_rate": 0.02, "response_time_p95": 450.5, "cpu_utilization": None}
    )
    validate_test_results({"passed": 1402, "failed": 2, "skipped": 5, "failing_tests": ["a::b"]})
    validate_changes(["Added payment processing"] * 400)
