"""Format-neutral helpers the adapters share when translating to and from wire formats.

Nothing here knows about HTTP: parsing tool-call arguments, putting tool results in the
order of their calls, normalising finish reasons, and the per-model limits table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agent.messages import Message, ToolCall

# Where the raw text of unparseable tool-call arguments is kept. The tool registry then
# reports "invalid arguments" to the model, which can try again, instead of the run dying.
RAW_ARGUMENTS_KEY = "_raw_arguments"


def parse_arguments(raw: str | None) -> dict[str, Any]:
    """Parse a tool call's JSON arguments; never raise."""
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: raw}
    if isinstance(value, dict):
        return value
    return {RAW_ARGUMENTS_KEY: raw}


def dump_arguments(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def order_tool_results(messages: Sequence[Message]) -> list[Message]:
    """Put each run of tool results in the order of the calls of the assistant message
    before it. APIs pair results with calls; Anthropic in particular wants the
    `tool_result` blocks in the order of the `tool_use` blocks."""
    ordered: list[Message] = []
    call_order: dict[str, int] = {}
    run: list[Message] = []

    def flush() -> None:
        if not run:  # most messages: no results waiting
            return
        if len(run) > 1:
            unknown = len(call_order)
            run.sort(key=lambda m: call_order.get(m.tool_call_id or "", unknown))
        ordered.extend(run)
        run.clear()

    for message in messages:
        if message.role == "tool":
            run.append(message)
            continue
        flush()
        ordered.append(message)
        if message.role == "assistant":
            call_order = {call.id: i for i, call in enumerate(message.tool_calls)}
    flush()
    return ordered


def normalise_finish_reason(
    reason: str | None, mapping: dict[str, str], tool_calls: Sequence[ToolCall]
) -> str | None:
    """Map a provider's stop reason to ours ("stop", "tool_calls", "length", ...).

    Several OpenAI-compatible servers (and Ollama) say "stop" even when the reply is a
    tool call, so the presence of tool calls wins over a plain stop."""
    normalised = mapping.get(reason, reason) if reason is not None else None
    if tool_calls and normalised in (None, "stop"):
        return "tool_calls"
    return normalised


def response_metadata(response_id: Any) -> dict[str, str]:
    """The assistant message's metadata naming the provider's id of the reply, when it gave
    one (traced as `gen_ai.response.id`; support teams ask for it)."""
    return {"response_id": response_id} if isinstance(response_id, str) and response_id else {}


def tool_result_text(message: Message) -> str:
    """The content of a tool result for APIs without an error flag on tool messages."""
    if message.is_error and not message.content.lower().startswith("error"):
        return f"Error: {message.content}"
    return message.content


# (context window, max output tokens) by model-name prefix; the longest prefix wins.
# Vendor prefixes ("anthropic/", "openai/", as OpenRouter spells them) are ignored.
MODEL_LIMITS: dict[str, tuple[int, int]] = {
    # Anthropic
    "claude-opus-4": (200_000, 32_000),
    "claude-sonnet-4": (200_000, 64_000),
    "claude-haiku-4": (200_000, 64_000),
    "claude-3-7-sonnet": (200_000, 64_000),
    "claude-3-5-sonnet": (200_000, 8_192),
    "claude-3-5-haiku": (200_000, 8_192),
    "claude-3-haiku": (200_000, 4_096),
    "claude-3-opus": (200_000, 4_096),
    # OpenAI
    "gpt-5": (400_000, 128_000),
    "gpt-4.1": (1_047_576, 32_768),
    "gpt-4o": (128_000, 16_384),
    "gpt-4-turbo": (128_000, 4_096),
    "gpt-4": (8_192, 8_192),
    "gpt-3.5-turbo": (16_385, 4_096),
    "o1": (200_000, 100_000),
    "o3": (200_000, 100_000),
    "o4-mini": (200_000, 100_000),
    # Open models, as served by OpenRouter, vLLM or llama.cpp
    "llama-3.1": (131_072, 8_192),
    "llama-3.3": (131_072, 8_192),
    "qwen-2.5": (32_768, 8_192),
    "qwen3": (40_960, 8_192),
    "mistral": (32_768, 8_192),
    "deepseek": (128_000, 8_192),
    "gemini": (1_048_576, 8_192),
}


def model_limits(
    model: str,
    default: tuple[int, int],
    table: dict[str, tuple[int, int]] | None = None,
) -> tuple[int, int]:
    """Look a model up by its longest matching prefix."""
    table = MODEL_LIMITS if table is None else table
    name = model.rsplit("/", 1)[-1].lower()
    best = ""
    for prefix in table:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return table[best] if best else default
