"""A quick "certainly valid" for the arguments of a tool with a plain schema.

The tool registry checks a call's arguments against the tool's JSON schema with jsonschema,
whose messages the model reads when they are wrong. jsonschema makes a validator object for
every property it descends into, which was most of a tool call's own cost; yet almost every
call the model makes is valid. `compile_quick_check` turns a schema made only of the
keywords below into a plain function that says True only when jsonschema would find no
error, and False whenever it is unsure; the registry then asks jsonschema, as before, for the
messages. Any keyword outside the list, a `$ref`, a type given as a list, means no quick
check at all (None).

The check is stricter than jsonschema, never looser: types by exact class (an integer is an
`int`, never `True` or `1.0`), a number finite, an enum's member of the same class.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

QuickCheck = Callable[[Any], bool]

# Keywords that only annotate a schema (no effect on validity).
_ANNOTATIONS = frozenset({"description", "default", "title", "examples"})
_ALLOWED = {
    "object": frozenset({"properties", "required", "additionalProperties"}),
    "string": frozenset({"minLength", "maxLength", "enum"}),
    "integer": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "boolean": frozenset({"enum"}),
    "array": frozenset({"items", "minItems", "maxItems"}),
}
_SCALAR_ENUM = (str, int, bool)


class _Unsupported(Exception):
    pass


def compile_quick_check(schema: Any) -> QuickCheck | None:
    """The quick check of `schema`, or None when it uses anything the check does not know.

    Only for the drafts where `exclusiveMinimum`/`exclusiveMaximum` are numbers (draft 6 and
    later): the caller says which draft its validator is."""
    try:
        return _compile(schema)
    except _Unsupported:
        return None


def _compile(schema: Any) -> QuickCheck:
    if not isinstance(schema, dict):
        raise _Unsupported
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in _ALLOWED:
        raise _Unsupported
    allowed = _ALLOWED[kind]
    for keyword in schema:
        if keyword != "type" and keyword not in allowed and keyword not in _ANNOTATIONS:
            raise _Unsupported
    if kind == "object":
        return _object(schema)
    if kind == "string":
        return _string(schema)
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        enum = _enum(schema, bool)
        return lambda value: type(value) is bool and (enum is None or value in enum)
    return _array(schema)


def _int(schema: dict[str, Any], keyword: str) -> int | None:
    value = schema.get(keyword)
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise _Unsupported
    return value


def _bound(schema: dict[str, Any], keyword: str) -> float | None:
    value = schema.get(keyword)
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value):
        raise _Unsupported
    return value


def _enum(schema: dict[str, Any], cls: type) -> tuple[Any, ...] | None:
    if "enum" not in schema:
        return None
    members = schema["enum"]
    # Members of the value's own class only, so that `==` means what jsonschema's equality
    # means (it tells True from 1).
    if not isinstance(members, list) or not all(type(m) is cls for m in members):
        raise _Unsupported
    return tuple(members)


def _string(schema: dict[str, Any]) -> QuickCheck:
    low = _int(schema, "minLength") or 0
    high = _int(schema, "maxLength")
    enum = _enum(schema, str)

    def check(value: Any) -> bool:
        if type(value) is not str:
            return False
        size = len(value)
        if size < low or (high is not None and size > high):
            return False
        return enum is None or value in enum

    return check


def _number(schema: dict[str, Any], *, integer: bool) -> QuickCheck:
    low = _bound(schema, "minimum")
    high = _bound(schema, "maximum")
    above = _bound(schema, "exclusiveMinimum")
    below = _bound(schema, "exclusiveMaximum")
    enum = _enum(schema, int) if integer else None

    def check(value: Any) -> bool:
        cls = type(value)
        if integer:
            if cls is not int:
                return False
        elif cls is not int and not (cls is float and math.isfinite(value)):
            return False
        if low is not None and value < low:
            return False
        if high is not None and value > high:
            return False
        if above is not None and value <= above:
            return False
        if below is not None and value >= below:
            return False
        return enum is None or value in enum

    return check


def _array(schema: dict[str, Any]) -> QuickCheck:
    low = _int(schema, "minItems") or 0
    high = _int(schema, "maxItems")
    items = _compile(schema["items"]) if "items" in schema else None

    def check(value: Any) -> bool:
        if type(value) is not list:
            return False
        if len(value) < low or (high is not None and len(value) > high):
            return False
        return items is None or all(items(item) for item in value)

    return check


def _object(schema: dict[str, Any]) -> QuickCheck:
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise _Unsupported
    checks = {name: _compile(sub) for name, sub in properties.items()}
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise _Unsupported
    extra = schema.get("additionalProperties", True)
    if extra is not True and extra is not False:
        raise _Unsupported  # a schema for the others: not known here
    closed = extra is False

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return False
        for name in required:
            if name not in value:
                return False
        for name, item in value.items():
            item_check = checks.get(name)
            if item_check is None:
                if closed:
                    return False
            elif not item_check(item):
                return False
        return True

    return check
