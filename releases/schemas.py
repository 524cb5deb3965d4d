"""The rules of the release data and risk-report fields, and the Django validators that hold them.

One validation for the stored data, wherever it comes from (the admin, seed_demo, ingestion,
a script): the model's field validators run these, and `Release.save()` runs the same
validators, so no writer can store what `full_clean` refuses.

None (NULL) always passes: it means the data is missing, which is allowed.

Before the JSON schema looks at a value, `shape_problem` walks it without recursion: a value
nested too deep, too large, holding a number that is not finite or beyond any real figure, or
text with a NUL or a lone surrogate is refused there, because the schema library (and every
encoder after it) would raise RecursionError, OverflowError or UnicodeEncodeError on it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonschema
from django.core.exceptions import ValidationError

from releases.validation import text_problem

# Limits no real release reaches: a changelog of 2,000 entries, a test suite of a billion tests.
MAX_TEXT_CHARS = 2_000
MAX_ITEMS = 5_000
MAX_DEPTH = 4
MAX_NODES = 20_000
MAX_COUNT = 10**9
# The largest number any field holds: beyond it a float loses integers and formats wrongly.
MAX_NUMBER = 2**53
# A p95 latency above an hour is a unit mistake (seconds? microseconds?), not a measurement.
MAX_LATENCY_MS = 3_600_000


@dataclass(frozen=True)
class Metric:
    """A deployment metric the site knows: what it measures and the range a value must be in."""

    description: str
    maximum: float


FRACTION = 1.0
METRICS: dict[str, Metric] = {
    "error_rate": Metric("the share of failed requests, 0 to 1 (0.02 = 2 %)", FRACTION),
    "error_rate_baseline": Metric(
        "the error rate before this release (its baseline window), 0 to 1", FRACTION
    ),
    "response_time_p95": Metric("the p95 latency in milliseconds", MAX_LATENCY_MS),
    "response_time_p95_baseline": Metric(
        "the p95 latency before this release, in milliseconds", MAX_LATENCY_MS
    ),
    "response_time_p50": Metric("the median latency in milliseconds", MAX_LATENCY_MS),
    "response_time_p99": Metric("the p99 latency in milliseconds", MAX_LATENCY_MS),
    "cpu_utilization": Metric("the share of CPU in use, 0 to 1", FRACTION),
    "memory_utilization": Metric("the share of memory in use, 0 to 1", FRACTION),
    "availability": Metric("the share of time the service answered, 0 to 1", FRACTION),
    "requests_per_second": Metric("the request throughput", float(MAX_COUNT)),
}
KNOWN_METRICS = ", ".join(METRICS)

COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
TEXT = {"type": "string", "maxLength": MAX_TEXT_CHARS}

CHANGES_SCHEMA: dict[str, Any] = {
    "type": "array",
    "maxItems": MAX_ITEMS,
    "items": {**TEXT, "minLength": 1},
}

TEST_RESULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "passed": COUNT,
        "failed": COUNT,
        "skipped": COUNT,
        "failing_tests": {"type": "array", "maxItems": MAX_ITEMS, "items": TEXT},
        # From JUnit XML (sources/summary.py): tests that passed only on a rerun.
        "flaky": COUNT,
        "flaky_tests": {"type": "array", "maxItems": MAX_ITEMS, "items": TEXT},
        # From JUnit XML, given only when there are some: pytest's expected failures (not in
        # `skipped`), and tests the reports' headers count that no <testcase> is written for
        # (pytest 9's subtests).
        "xfailed": COUNT,
        "not_in_test_cases": COUNT,
        # Of those subtests, the ones that failed (in `failed`'s tests, not in its count).
        "failed_subtests": COUNT,
        # The runner marked the run interrupted (pytest's report of a run stopped by Ctrl-C or
        # a time box): the tests after the mark never ran.
        "interrupted": {"type": "boolean"},
    },
    "additionalProperties": False,
}

DEPLOYMENT_METRICS_SCHEMA: dict[str, Any] = {
    "type": "object",
    # A metric that is null was not measured.
    "properties": {
        name: {"type": ["number", "null"], "minimum": 0, "maximum": metric.maximum}
        for name, metric in METRICS.items()
    },
    "additionalProperties": False,
}

FINDINGS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "maxItems": MAX_ITEMS,
    "items": {"type": "string", "minLength": 1},
}


def number_problem(value: int | float) -> str | None:
    """Why this number cannot be stored or shown (not finite, beyond any real figure)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    if abs(value) > MAX_NUMBER:
        return f"is larger than {MAX_NUMBER:,} (no real figure is)"
    return None


def shape_problem(value: Any, *, max_depth: int = MAX_DEPTH) -> str | None:
    """The first reason this JSON value cannot be stored, or None. Iterative: a value nested
    thousands of levels deep is measured, not recursed into."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    nodes = 0
    while stack:
        item, where, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return f"holds more than {MAX_NODES:,} values"
        at = f" (at {where})" if where else ""
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, int | float):
            if problem := number_problem(item):
                return f"a number{at} {problem}"
        elif isinstance(item, str):
            if problem := text_problem(item):
                return f"the text{at} {problem}"
            if len(item) > MAX_TEXT_CHARS:
                return f"the text{at} is longer than {MAX_TEXT_CHARS:,} characters"
        elif isinstance(item, list | dict):
            if depth >= max_depth:
                return f"the value{at} is nested deeper than {max_depth} levels"
            if len(item) > MAX_ITEMS:
                return f"the value{at} has more than {MAX_ITEMS:,} items"
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str) or text_problem(key) or len(key) > 200:
                        return f"a key{at} is not a short text without NUL or lone surrogates"
                    stack.append((child, f"{where}/{key}" if where else key, depth + 1))
            else:
                for index, child in enumerate(item):
                    stack.append((child, f"{where}/{index}" if where else str(index), depth + 1))
        else:
            return f"the value{at} is a {type(item).__name__}, not JSON"
    return None


def _unknown_metrics(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    unknown = sorted(key for key in value if key not in METRICS)
    if not unknown:
        return None
    names = ", ".join(repr(key) for key in unknown)
    return f"unknown metric {names}; the known metrics are: {KNOWN_METRICS}"


def _validator(
    schema: dict[str, Any], what: str, extra: Callable[[Any], str | None] | None = None
) -> Callable[[Any], None]:
    checker = jsonschema.Draft202012Validator(schema)

    def validate(value: Any) -> None:
        if value is None:
            return
        if problem := shape_problem(value):
            raise ValidationError(f"{what}: {problem}.", code="invalid_data")
        if extra is not None and (problem := extra(value)):
            raise ValidationError(f"{what}: {problem}.", code="invalid_data")
        errors = sorted(checker.iter_errors(value), key=lambda error: list(error.path))
        if errors:
            messages = []
            for error in errors[:10]:
                where = "/".join(str(part) for part in error.path)
                message = error.message if len(error.message) <= 300 else error.message[:300] + "…"
                messages.append(f"{what}{'/' + where if where else ''}: {message}")
            raise ValidationError(messages)

    validate.__name__ = f"validate_{what}"
    validate.__qualname__ = validate.__name__
    return validate


validate_changes = _validator(CHANGES_SCHEMA, "changes")
validate_test_results = _validator(TEST_RESULTS_SCHEMA, "test_results")
validate_deployment_metrics = _validator(
    DEPLOYMENT_METRICS_SCHEMA, "deployment_metrics", _unknown_metrics
)
validate_findings = _validator(FINDINGS_SCHEMA, "findings")
