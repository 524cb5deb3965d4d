from __future__ import annotations

import json

from agent.messages import Message, ToolCall, ToolResult
from agent.telemetry.content import (
    finish_reason,
    input_messages,
    output_messages,
    system_instructions,
    text_message,
)


def test_providers_finish_reasons_map_to_the_conventions() -> None:
    assert finish_reason("end_turn") == "stop"
    assert finish_reason("tool_use") == "tool_call"
    assert finish_reason("tool_calls") == "tool_call"
    assert finish_reason("max_tokens") == "length"
    assert finish_reason(None) == "stop"
    assert finish_reason("something_new") == "something_new"


def test_an_assistant_message_with_text_and_a_call_has_both_parts() -> None:
    call = ToolCall(id="c1", name="file_risk_report", arguments={"severity": "low"})
    [message] = json.loads(output_messages(Message.assistant("Filing.", [call]), "tool_use"))
    assert message == {
        "role": "assistant",
        "parts": [
            {"type": "text", "content": "Filing."},
            {
                "type": "tool_call",
                "id": "c1",
                "name": "file_risk_report",
                "arguments": {"severity": "low"},
            },
        ],
        "finish_reason": "tool_call",
    }


def test_a_tool_message_is_a_tool_call_response() -> None:
    result = ToolResult(tool_call_id="c1", name="t", content='{"ok": true}', success=True)
    messages = json.loads(input_messages([Message.user("go"), Message.tool(result)]))
    assert messages[1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": '{"ok": true}'}],
    }
    # An empty user message still has its (empty) list of parts, as the schema requires.
    assert json.loads(input_messages([Message.user("")])) == [{"role": "user", "parts": []}]


def test_system_instructions_and_text_messages() -> None:
    assert json.loads(system_instructions("Be careful.")) == [
        {"type": "text", "content": "Be careful."}
    ]
    assert json.loads(text_message("user", "é")) == [
        {"role": "user", "parts": [{"type": "text", "content": "é"}]}
    ]
    assert "finish_reason" not in text_message("user", "x")
