"""A run that repeats a refused call: what the model is told the second time.

Measured on the local model (issue 40): one run of the default profile spent all 12 steps
re-filing a report refused for the same reason, each time told the same words. The second
time a tool refuses a call for the same reason, its result ends with the refusal's exact
lines (field and limit) and an example of a call that would pass, built from the tool's own
schema and the model's arguments (`repeated_hint`); the third time the loop ends the run
(`max_repeated_tool_failures`), and the policy's verdict is stored for a person.

"The same reason" ignores the arguments and the long texts a refusal quotes back: a model
that shortens one finding and not the other is refused for the same reason with other words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import jsonschema

from agent.messages import ToolCall, ToolDefinition

# Quoted values of 40 characters or more are the model's text echoed back, not the reason.
_QUOTED = re.compile(r"('[^'\n]{40,}'|\"[^\"\n]{40,}\")")
_AT_MOST_CHARS = re.compile(r"at most (\d+) characters?")
_AT_MOST_ITEMS = re.compile(r"at most (\d+) items?")
_PROBLEM_LINE = re.compile(r"^\s*-\s+(.+)$", re.MULTILINE)
_PROBLEMS_JSON = re.compile(r"\"problems\":\s*(\[[^\]]*\])")
EXAMPLE_TEXT_CHARS = 160
PLACEHOLDER = "<one finding in a sentence>"


def failure_reason(content: str) -> str:
    """A refusal's reason, without the model's own text it quotes back."""
    return _QUOTED.sub("…", " ".join(content.split()))


def _problems(content: str) -> list[str]:
    """The refusal's lines that name a field and what is wrong with it."""
    found = _PROBLEMS_JSON.search(content)
    if found is not None:
        try:
            listed = json.loads(found.group(1))
        except ValueError:
            listed = None
        if isinstance(listed, list) and listed:
            return [str(p) for p in listed]
    return [m.group(1).strip() for m in _PROBLEM_LINE.finditer(content)][:5]


def _clip(text: str, limit: int) -> str:
    limit = min(limit, EXAMPLE_TEXT_CHARS)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _fits(schema: Mapping[str, Any], value: Any) -> bool:
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


def _placeholder(schema: Mapping[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "array":
        return [_placeholder(schema.get("items") or {"type": "string"})]
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return PLACEHOLDER


def _example_value(schema: Mapping[str, Any], given: Any, chars: int, items: int) -> Any:
    if isinstance(given, str):
        given = _clip(given, chars) if given.strip() else None
    elif isinstance(given, list):
        kept = [_clip(g, chars) if isinstance(g, str) else g for g in given]
        given = [g for g in kept if not isinstance(g, str) or g.strip()][:items] or None
    if given is not None and _fits(schema, given):
        return given
    return _placeholder(schema)


def example_call(definition: ToolDefinition, call: ToolCall, refusal: str) -> dict[str, Any]:
    """The model's call made valid: its own values where they pass the tool's schema and the
    limits the refusal states, the schema's first choice or a placeholder where not."""
    chars = min((int(n) for n in _AT_MOST_CHARS.findall(refusal)), default=EXAMPLE_TEXT_CHARS)
    items = min((int(n) for n in _AT_MOST_ITEMS.findall(refusal)), default=5)
    properties = definition.parameters.get("properties") or {}
    required = set(definition.parameters.get("required") or [])
    example: dict[str, Any] = {}
    for name, schema in properties.items():
        given = call.arguments.get(name)
        if given is None and name not in required:
            continue
        example[name] = _example_value(schema, given, chars, items)
    return example


def repeated_hint(definition: ToolDefinition | None, call: ToolCall, refusal: str) -> str:
    """What the second identical refusal adds: the exact problem and a call that passes."""
    problems = _problems(refusal)
    lines = [
        "",
        f"This is the second time {call.name} was refused for this same reason. "
        "A third time ends the assessment and a person decides without you.",
    ]
    if problems:
        lines.append("Exactly what is wrong: " + "; ".join(problems) + ".")
    if definition is not None:
        example = json.dumps(example_call(definition, call, refusal), ensure_ascii=False)
        lines.append(f"A call that passes looks like this: {call.name}({example})")
    return "\n".join(lines)
