from __future__ import annotations

import pytest

from agent.messages import Message, ToolCall
from agent.providers.wire import (
    RAW_ARGUMENTS_KEY,
    dump_arguments,
    model_limits,
    normalise_finish_reason,
    order_tool_results,
    parse_arguments,
    tool_result_text,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        ("   ", {}),
        (None, {}),
        ('{"a": ', {RAW_ARGUMENTS_KEY: '{"a": '}),
        ("[1, 2]", {RAW_ARGUMENTS_KEY: "[1, 2]"}),
        ("null", {RAW_ARGUMENTS_KEY: "null"}),
    ],
)
def test_parse_arguments_never_raises(raw: str | None, expected: dict) -> None:
    assert parse_arguments(raw) == expected


def test_dump_arguments_is_compact_and_keeps_unicode() -> None:
    assert dump_arguments({"note": "café", "n": 1}) == '{"note":"café","n":1}'


def tool(call_id: str) -> Message:
    return Message(role="tool", tool_call_id=call_id, name="t", content=call_id)


def test_order_tool_results_follows_the_calls() -> None:
    calls = [ToolCall(id=i, name="t") for i in ("a", "b", "c")]
    messages = [
        Message.user("go"),
        Message.assistant("", calls),
        tool("c"),
        tool("stray"),
        tool("a"),
        tool("b"),
        Message.user("more"),
        Message.assistant("", [ToolCall(id="d", name="t")]),
        tool("d"),
    ]
    ordered = order_tool_results(messages)
    assert [m.tool_call_id for m in ordered if m.role == "tool"] == ["a", "b", "c", "stray", "d"]
    assert [m.role for m in ordered] == [m.role for m in messages]


@pytest.mark.parametrize(
    ("reason", "has_calls", "expected"),
    [
        ("end_turn", False, "stop"),
        ("stop", True, "tool_calls"),
        (None, True, "tool_calls"),
        (None, False, None),
        ("length", True, "length"),
        ("weird", False, "weird"),
    ],
)
def test_normalise_finish_reason(reason: str | None, has_calls: bool, expected: str | None) -> None:
    calls = [ToolCall(id="x", name="t")] if has_calls else []
    assert normalise_finish_reason(reason, {"end_turn": "stop"}, calls) == expected


@pytest.mark.parametrize(
    ("content", "is_error", "expected"),
    [
        ("fine", False, "fine"),
        ("timed out", True, "Error: timed out"),
        ("Error: already marked", True, "Error: already marked"),
        ("error in lower case", True, "error in lower case"),
    ],
)
def test_tool_result_text(content: str, is_error: bool, expected: str) -> None:
    message = Message(role="tool", tool_call_id="x", content=content, is_error=is_error)
    assert tool_result_text(message) == expected


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o-mini", (128_000, 16_384)),
        ("gpt-4", (8_192, 8_192)),
        ("gpt-4.1-mini", (1_047_576, 32_768)),
        ("openai/gpt-4o", (128_000, 16_384)),
        ("anthropic/claude-3-5-haiku", (200_000, 8_192)),
        ("meta-llama/Llama-3.1-8B-Instruct", (131_072, 8_192)),
        ("something-else", (1, 2)),
    ],
)
def test_model_limits_by_longest_prefix(model: str, expected: tuple[int, int]) -> None:
    assert model_limits(model, (1, 2)) == expected


def test_model_limits_with_a_custom_table() -> None:
    assert model_limits("x-large", (1, 1), {"x": (5, 5), "x-l": (9, 9)}) == (9, 9)
