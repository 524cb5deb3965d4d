from __future__ import annotations

import json

from agent.messages import ToolCall, ToolDefinition
from agent.repetition import PLACEHOLDER, example_call, failure_reason, repeated_hint

REPORT = ToolDefinition(
    name="file_risk_report",
    description="File the risk report.",
    parameters={
        "type": "object",
        "properties": {
            "release_id": {"type": "string", "minLength": 1},
            "severity": {"type": "string", "enum": ["high", "medium", "low"]},
            "findings": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "summary": {"type": "string"},
        },
        "required": ["release_id", "severity", "findings"],
    },
)
TOO_LONG = (
    'Error: The release API rejected the report (400 Bad Request). It said: {"error": '
    '"Invalid risk report: findings.0: String should have at most 1000 characters.", '
    '"problems": ["findings.0: String should have at most 1000 characters"]}'
)


def filing(**arguments: object) -> ToolCall:
    return ToolCall(id="c1", name="file_risk_report", arguments=arguments)


def test_the_same_reason_ignores_the_models_own_text_quoted_back() -> None:
    one = f"Refused: finding {'x' * 50!r} is not grounded."
    other = f"Refused: finding {'y' * 60!r} is not grounded."
    assert failure_reason(one) == failure_reason(other)
    assert failure_reason("Refused: 'v1' is not 'v2'.") != failure_reason(
        "Refused: 'v1' is not 'v3'."
    )


def test_the_example_keeps_what_passes_and_fixes_the_field_at_fault_within_its_limit() -> None:
    call = filing(release_id="v2.1.0", severity="critical", findings=["x" * 1500, ""])
    example = example_call(REPORT, call, TOO_LONG)
    assert example["release_id"] == "v2.1.0"
    assert example["severity"] == "high"  # the schema's first choice, not "critical"
    assert len(example["findings"]) == 1 and 0 < len(example["findings"][0]) <= 1000
    assert "summary" not in example  # optional and not given


def test_an_example_for_nothing_usable_uses_placeholders() -> None:
    example = example_call(REPORT, filing(), "Invalid arguments")
    assert example == {"release_id": PLACEHOLDER, "severity": "high", "findings": [PLACEHOLDER]}


def test_the_hint_says_the_exact_field_and_limit_and_a_call_that_passes() -> None:
    call = filing(release_id="v2.1.0", severity="high", findings=["x" * 1500])
    hint = repeated_hint(REPORT, call, TOO_LONG)
    assert "second time file_risk_report was refused" in hint
    assert "findings.0: String should have at most 1000 characters." in hint
    shown = hint.split("looks like this: file_risk_report(", 1)[1].rstrip(")")
    assert json.loads(shown)["release_id"] == "v2.1.0"


def test_the_hint_reads_the_registrys_listed_problems() -> None:
    refusal = (
        "Invalid arguments for 'file_risk_report', so the tool was not run:\n"
        "- severity: 'critical' is not one of ['high', 'medium', 'low']\nCall it again."
    )
    hint = repeated_hint(REPORT, filing(severity="critical"), refusal)
    assert "Exactly what is wrong: severity: 'critical' is not one of" in hint
