"""The hostile release values of the fault campaign (issue 22): 39 values for the three data
fields, each as the JSON text a person types into the admin's box.

Huge numbers, NaN, Infinity, 1e999, a 5,000-digit integer, 3,000 levels of nesting, lone
surrogates, NUL, unknown keys, wrong types, out-of-range figures, oversized text. Every one must
be refused with a message (never a 500), and none may break a page if an old row holds it.
"""

from __future__ import annotations

NINES_400 = "9" * 400
DIGITS_5000 = "1" + "0" * 4999
DEEP = "[" * 3000 + "]" * 3000
LONG = "x" * 10_000

HOSTILE: list[tuple[str, str]] = [
    ("deployment_metrics", f'{{"error_rate": 0.5, "response_time_p95": {NINES_400}}}'),
    ("deployment_metrics", '{"error_rate": NaN}'),
    ("deployment_metrics", '{"error_rate": Infinity}'),
    ("deployment_metrics", '{"response_time_p95": -Infinity}'),
    ("deployment_metrics", '{"response_time_p95": 1e999}'),
    ("deployment_metrics", f'{{"response_time_p95": {DIGITS_5000}}}'),
    ("deployment_metrics", '{"response_time_p95": 1e308}'),
    ("deployment_metrics", '{"error_rate": 1.5}'),
    ("deployment_metrics", '{"error_rate": -0.1}'),
    ("deployment_metrics", '{"response_time_p95": -5}'),
    ("deployment_metrics", '{"p95_ms": 450}'),
    ("deployment_metrics", '{"error_rate": "0.02"}'),
    ("deployment_metrics", '{"error_rate": true}'),
    ("deployment_metrics", "[0.02, 450]"),
    ("deployment_metrics", '"fast"'),
    ("deployment_metrics", '{"\\ud800": 1}'),
    ("deployment_metrics", '{"error\\u0000rate": 0.1}'),
    ("deployment_metrics", f'{{"error_rate": {DEEP}}}'),
    ("deployment_metrics", '{"error_rate": 0.1, "error_rate": 0.2}'),
    ("test_results", f'{{"passed": {NINES_400}, "failed": 1}}'),
    ("test_results", '{"failed": NaN}'),
    ("test_results", '{"failed": 1e999}'),
    ("test_results", f'{{"passed": {DIGITS_5000}}}'),
    ("test_results", '{"failed": -1}'),
    ("test_results", '{"failed": 1.5}'),
    ("test_results", '{"failing_tests": ["\\ud800"]}'),
    ("test_results", '{"failing_tests": ["a\\u0000b"]}'),
    ("test_results", f'{{"failing_tests": ["{LONG}"]}}'),
    ("test_results", f'{{"passed": {DEEP}}}'),
    ("test_results", '{"passes": 3}'),
    ("changes", '["\\ud800"]'),
    ("changes", '["\\u0000"]'),
    ("changes", f'["{LONG}"]'),
    ("changes", DEEP),
    ("changes", "[1e999]"),
    ("changes", "[NaN]"),
    ("changes", '{"a": 1}'),
    ("changes", '[""]'),
    ("changes", "[" + ", ".join(['"a"'] * 6000) + "]"),
]
assert len(HOSTILE) == 39
