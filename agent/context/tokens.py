"""Token estimates for when the provider has not told us the exact count.

A deliberate heuristic (about four characters a token, plus a per-message overhead): the
exact figure comes from the provider's usage after each call, so only the messages added
since the last call are ever estimated, and the error stays bounded to those.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from agent.messages import Message

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4

# json.dumps builds a new encoder on every call when given options; the context manager
# estimates every message of a long history once, so one shared encoder saves a third.
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))


def estimate_text_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_message_tokens(message: Message) -> int:
    tokens = MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(message.content)
    for call in message.tool_calls:
        tokens += MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(call.name)
        tokens += estimate_text_tokens(_COMPACT_JSON.encode(call.arguments))
    return tokens


def estimate_tokens(messages: Sequence[Message], system: str = "") -> int:
    total = estimate_text_tokens(system) + (MESSAGE_OVERHEAD_TOKENS if system else 0)
    return total + sum(estimate_message_tokens(m) for m in messages)
