from __future__ import annotations

import random
from typing import Any

import jsonschema
import pytest

from agent.tools.drilldown import register_drill_down_tools
from agent.tools.quick_check import compile_quick_check
from agent.tools.registry import ToolRegistry
from agent.tools.release_tools import ReleaseTools

OWN: dict[str, Any] = {
    "type": "object",
    "properties": {
        "flag": {"type": "boolean", "enum": [True]},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "count": {"type": "integer", "minimum": -2, "maximum": 3, "enum": [0, 1, 2]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 2}, "maxItems": 2},
        "inner": {
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1}},
            "required": ["name"],
            "additionalProperties": False,
        },
    },
    "required": ["count"],
}


def _schemas() -> list[dict[str, Any]]:
    registry = ToolRegistry()
    release_tools = ReleaseTools("http://api.invalid", release_id="v1")
    release_tools.register(registry)
    register_drill_down_tools(registry, release_tools)
    return [definition.parameters for definition in registry.get_tools()] + [OWN]


_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    2,
    3,
    -1,
    100,
    101,
    1.0,
    0.5,
    float("nan"),
    float("inf"),
    "",
    "v2.1.0",
    "high",
    "low",
    "failed",
    "all",
    "x" * 201,
    "ab",
    "é",
    [],
    ["a"],
    ["ab", "c"],
    ["abc"],
    [1],
    {},
    {"name": ""},
    {"name": "n"},
    {"name": "n", "other": 1},
]


def _arguments(schema: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    names = [*schema.get("properties", {}), "unknown"]
    return {name: rng.choice(_VALUES) for name in rng.sample(names, rng.randint(0, len(names)))}


@pytest.mark.parametrize("schema", _schemas(), ids=lambda schema: ",".join(schema["properties"]))
def test_the_quick_check_never_passes_what_jsonschema_refuses(schema: dict[str, Any]) -> None:
    quick = compile_quick_check(schema)
    assert quick is not None
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(31)
    passed = 0
    for _ in range(4000):
        arguments = _arguments(schema, rng)
        if quick(arguments):
            passed += 1
            assert not list(validator.iter_errors(arguments)), arguments
    assert passed > 0  # it does pass valid calls (else it would save nothing)


def test_the_calls_of_a_run_pass_the_quick_check() -> None:
    by_name = {",".join(s["properties"]): compile_quick_check(s) for s in _schemas()}
    report = by_name["release_id,severity,findings,summary"]
    assert report is not None
    assert report({"release_id": "v2.1.0", "severity": "high", "findings": ["p95 up 40%"]})
    assert not report({"release_id": "v2.1.0", "severity": "severe", "findings": ["x"]})
    assert not report({"release_id": "v2.1.0", "severity": "high", "findings": []})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^a"}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
        {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {"a": {"type": "integer", "enum": [True]}}},
        {"type": "object", "properties": {"a": {"type": "number", "exclusiveMinimum": True}}},
        {"type": "object", "properties": {"a": {"type": "string", "format": "date"}}},
    ],
)
def test_a_schema_with_anything_else_has_no_quick_check(schema: dict[str, Any]) -> None:
    assert compile_quick_check(schema) is None
