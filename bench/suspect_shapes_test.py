"""Each shape of a real bug, built with real git and run by the real runner: the culprit is the
first suspect for every failing test, and the evidence says why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.suspect_shapes import SHAPES, Shape, run_shape
from bench.suspect_shapes_calls import CALL_SHAPES

# What the first suspect's evidence must say, shape by shape.
WHY = {
    "tests package (tomli)": (
        "its change is in `unescape`, which `loads` calls (through `parse_pair`, `parse_value`), "
        "which test_newline_escape calls; the test reaches it in 3 import steps; first, ahead of"
    ),
    "conftest fixture (markupsafe)": "its change is in `escape`, which test_escape[_fast] calls",
    "deleted line": "its change is in `to_metres`, which test_km calls",
    "schema change, setup errors": (
        "changed the schema (migrations/0002_order_currency.sql) and the test fails on it "
        "(NOT NULL constraint failed: orders.currency); its file names currency; "
        "the release's only schema change; first, ahead of"
    ),
    "require('../') (commander.js)": (
        'its change is in `option`, which "options dry run" calls; the test reaches it in 2 '
        "import steps; first, ahead of"
    ),
    "ES module, node:test (classnames)": (
        "changed dedupe.js, which tests/dedupe.js exercises: its change is in `appendString`, "
        'which `classNames` calls (through `appendValue`), which "joins strings" calls'
    ),
    "root test.js (debug)": 'its change is in `humanize`, which "humanize seconds" calls',
    "call across modules (python-semver CLI)": (
        "changed src/semverish/version.py, which tests/test_cli.py exercises: its change is in "
        "`bump_minor`, which `cmd_bump` calls, which test_cli[cmd_bump-args0-1.3.0]'s "
        "parameters name; the test reaches it in 2 import steps; first, ahead of"
    ),
    "doctest page (python-semver docs)": (
        "changed units/length.py, which the failing test exercises: its change is in "
        "`to_metres`, which usage.rst calls; it defines a function the failure's text calls"
    ),
}


ALL = (*SHAPES, *CALL_SHAPES)


@pytest.mark.parametrize("shape", ALL, ids=[s.name for s in ALL])
def test_the_culprit_is_first_and_the_evidence_says_why(shape: Shape, tmp_path: Path) -> None:
    if shape.language == "javascript" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    outcome = run_shape(shape, tmp_path / "repo")
    assert outcome.failures >= 1
    assert outcome.rank == 1, outcome
    assert WHY[outcome.shape] in outcome.first_reason, outcome.first_reason
    assert outcome.culprit[:9] in outcome.first_reason
