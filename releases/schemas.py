"""JSON schemas of the release data and risk-report fields, and Django validators for them.

None (NULL) always passes: it means the data is missing, which is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema
from django.core.exceptions import ValidationError

COUNT = {"type": "integer", "minimum": 0}

CHANGES_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "minLength": 1},
}

TEST_RESULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "passed": COUNT,
        "failed": COUNT,
        "skipped": COUNT,
        "failing_tests": {"type": "array", "items": {"type": "string"}},
        # From JUnit XML (sources/summary.py): tests that passed only on a rerun.
        "flaky": COUNT,
        "flaky_tests": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}

DEPLOYMENT_METRICS_SCHEMA: dict[str, Any] = {
    "type": "object",
    # error_rate is a fraction (0.02 = 2 %), response_time_p95 is in milliseconds; other
    # numeric metrics are welcome. A metric that is null was not measured.
    "properties": {
        "error_rate": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "response_time_p95": {"type": ["number", "null"], "minimum": 0},
    },
    "additionalProperties": {"type": ["number", "null"]},
}

FINDINGS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "minLength": 1},
}


def _validator(schema: dict[str, Any], what: str) -> Callable[[Any], None]:
    checker = jsonschema.Draft202012Validator(schema)

    def validate(value: Any) -> None:
        if value is None:
            return
        errors = sorted(checker.iter_errors(value), key=lambda error: list(error.path))
        if errors:
            messages = []
            for error in errors:
                where = "/".join(str(part) for part in error.path)
                messages.append(f"{what}{'/' + where if where else ''}: {error.message}")
            raise ValidationError(messages)

    validate.__name__ = f"validate_{what}"
    validate.__qualname__ = validate.__name__
    return validate


validate_changes = _validator(CHANGES_SCHEMA, "changes")
validate_test_results = _validator(TEST_RESULTS_SCHEMA, "test_results")
validate_deployment_metrics = _validator(DEPLOYMENT_METRICS_SCHEMA, "deployment_metrics")
validate_findings = _validator(FINDINGS_SCHEMA, "findings")
