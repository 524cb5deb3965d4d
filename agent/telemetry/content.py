"""Captured content in the GenAI semantic conventions' "parts" form.

`gen_ai.input.messages`, `gen_ai.output.messages` and `gen_ai.system_instructions` are span
attributes holding JSON (the conventions' schemas `gen-ai-input-messages.json`,
`gen-ai-output-messages.json`, `gen-ai-system-instructions.json`):

```
[{"role": "user", "parts": [{"type": "text", "content": "Assess ..."}]},
 {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_release_summary",
                                  "arguments": {"release_id": "v2.1.0"}}]},
 {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "{...}"}]}]
```

Output messages also carry `finish_reason`. Attributes rather than span events, since that is
where OTel viewers look: OpenInference (Phoenix) turns them into `llm.input_messages.*` and
`input.value` / `output.value`, Langfuse into an observation's input and output; span events
(`gen_ai.content.prompt`) were shown by neither.

Every string is scrubbed of registered secrets once it is JSON, so a key that slipped into a
prompt or a tool result never leaves the process.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agent.messages import Message
from agent.telemetry.logging import scrub

INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"

# The conventions' finish reasons; a provider's own word is kept when it has no equivalent.
_FINISH_REASONS = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_call",
    "tool_use": "tool_call",
    "tool_call": "tool_call",
    "function_call": "tool_call",
    "content_filter": "content_filter",
    "error": "error",
}


def to_json(value: Any) -> str:
    return scrub(json.dumps(value, ensure_ascii=False, default=str))


def finish_reason(reason: str | None) -> str:
    if not reason:
        return "stop"
    return _FINISH_REASONS.get(reason, reason)


def message_parts(message: Message) -> dict[str, Any]:
    """One message as the conventions' ChatMessage: its role and its parts."""
    parts: list[dict[str, Any]] = []
    if message.role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.content}
        )
    elif message.content:
        parts.append({"type": "text", "content": message.content})
    for call in message.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        )
    return {"role": message.role, "parts": parts}


def input_messages(messages: Sequence[Message]) -> str:
    return to_json([message_parts(message) for message in messages])


def output_messages(message: Message, reason: str | None) -> str:
    data = message_parts(message)
    data["finish_reason"] = finish_reason(reason)
    return to_json([data])


def text_message(role: str, text: str, reason: str | None = None) -> str:
    """A single text message (an agent's task, its final answer)."""
    data: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if reason is not None:
        data["finish_reason"] = finish_reason(reason)
    return to_json([data])


def system_instructions(system: str) -> str:
    return to_json([{"type": "text", "content": system}])
