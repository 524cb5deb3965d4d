"""A reviewer's label as an eval scenario: the release data as the agent saw it, the severity
the reviewer decided as the expectation, the reviewer's reason as the description.

Plain code over plain data (no ORM), so that the file it writes is checked by the same loader
`run_evals` uses (`evals.scenario.parse_scenario`) before it is written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# The agent's tools are named as the eval suite knows them (its loader refuses any other).
from evals.scenario import REPORT_TOOL, SUMMARY_TOOL, parse_scenario

TAG = "from-review"


class ScenarioRejected(ValueError):
    """The eval suite would refuse this scenario; the message says why."""


_NOT_ID = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True)
class Label:
    """What a reviewer decided about one report."""

    decision_id: int
    version: str
    title: str
    changes: list[str] | None
    test_results: dict[str, Any] | None
    deployment_metrics: dict[str, Any] | None
    decided_severity: str
    model_severity: str
    policy_severity: str
    overridden: bool
    reason: str
    wrong_finding: str
    reviewer: str


def scenario_id(label: Label) -> str:
    slug = _NOT_ID.sub("_", label.version.lower()).strip("_") or "release"
    return f"review_{slug}_{label.decision_id}"


def scenario_data(label: Label) -> dict[str, Any]:
    """The scenario as the loader reads it."""
    what = "overridden to" if label.overridden else "accepted as"
    lines = [f"{label.reviewer or 'A reviewer'} {what} {label.decided_severity}"]
    lines[0] += f" (the model filed {label.model_severity}"
    lines[0] += f", the policy said {label.policy_severity})." if label.policy_severity else ")."
    if label.reason.strip():
        lines.append(label.reason.strip())
    if label.wrong_finding:
        lines.append(f"Finding labelled wrong: {label.wrong_finding}")
    release: dict[str, Any] = {"version": label.version}
    if label.title:
        release["title"] = label.title
    # An absent field is not sent to the agent: how a scenario says "missing".
    if label.changes is not None:
        release["changes"] = list(label.changes)
    if label.test_results is not None:
        release["tests"] = dict(label.test_results)
    if label.deployment_metrics is not None:
        # TOML has no null: a metric that was not measured is left out.
        release["deployment_metrics"] = {
            key: value for key, value in label.deployment_metrics.items() if value is not None
        }
    expect: dict[str, Any] = {
        "report_required": True,
        "severity": label.decided_severity,
        "tools": {
            "must_call": [SUMMARY_TOOL, REPORT_TOOL],
            "order": [SUMMARY_TOOL, REPORT_TOOL],
        },
    }
    if label.wrong_finding:
        expect["forbidden_claims"] = [
            {"name": "the finding the reviewer labelled wrong", "any_of": [label.wrong_finding]}
        ]
    tags = [TAG, label.decided_severity, "override" if label.overridden else "accepted"]
    if label.wrong_finding:
        tags.append("wrong-finding")
    return {
        "id": scenario_id(label),
        "title": f"From review: {label.version} is {label.decided_severity}",
        "description": "\n".join(lines),
        "prompt": f"Assess the risk of release {label.version}",
        "release_id": label.version,
        "critical": False,
        "tags": tags,
        "release": release,
        "expect": expect,
    }


def scenario(label: Label) -> Any:
    """The scenario as the eval suite loads it (raises ScenarioRejected)."""
    try:
        return parse_scenario(scenario_data(label), source=f"{scenario_id(label)}.toml")
    except ValueError as exc:
        raise ScenarioRejected(str(exc)) from exc


def to_toml(data: dict[str, Any]) -> str:
    """TOML for the scenario's shapes: scalars, lists of scalars or of tables, nested tables."""
    out: list[str] = [
        "# Exported from a review decision in Detective; run_evals picks it up (tag from-review)."
    ]
    _table(out, [], data)
    return "\n".join(out).rstrip() + "\n"


def _table(out: list[str], path: list[str], data: dict[str, Any]) -> None:
    tables: list[tuple[str, dict[str, Any]]] = []
    arrays: list[tuple[str, list[dict[str, Any]]]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            arrays.append((key, value))
        else:
            out.append(f"{_key(key)} = {_value(value)}")
    for key, value in tables:
        out.extend(["", f"[{'.'.join(_key(p) for p in [*path, key])}]"])
        _table(out, [*path, key], value)
    for key, items in arrays:
        for item in items:
            out.extend(["", f"[[{'.'.join(_key(p) for p in [*path, key])}]]"])
            _table(out, [*path, key], item)


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _string(key)


def _string(text: str) -> str:
    # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")
