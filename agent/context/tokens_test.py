from __future__ import annotations

import json

import pytest

from agent.context.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    estimate_message_tokens,
    estimate_text_tokens,
    estimate_tokens,
)
from agent.messages import Message, ToolCall


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2)])
def test_text_is_about_four_characters_a_token(text: str, tokens: int) -> None:
    assert estimate_text_tokens(text) == tokens


def test_a_message_costs_its_text_plus_an_overhead() -> None:
    assert estimate_message_tokens(Message.user("x" * 40)) == MESSAGE_OVERHEAD_TOKENS + 10


def test_tool_calls_count_their_name_and_compact_json_arguments() -> None:
    arguments = {"release_id": "v2.1.0", "findings": ["a", "b"]}
    message = Message.assistant("", [ToolCall(id="c", name="file_it", arguments=arguments)])
    compact = json.dumps(arguments, separators=(",", ":"))
    expected = 2 * MESSAGE_OVERHEAD_TOKENS + 2 + estimate_text_tokens(compact)
    assert estimate_message_tokens(message) == expected


def test_the_total_includes_the_system_prompt() -> None:
    messages = [Message.user("x" * 8), Message.assistant("y" * 4)]
    assert estimate_tokens(messages) == 2 * MESSAGE_OVERHEAD_TOKENS + 3
    assert estimate_tokens(messages, "s" * 8) == 3 * MESSAGE_OVERHEAD_TOKENS + 5
