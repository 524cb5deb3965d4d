"""Data from outside (a release's changes, test names, metric notes) encoded so that it reads
as data and nothing else.

A tool result reaches the model inside the chat template's own markup: Qwen's
`<tool_response>...</tool_response>`, ChatML's `<|im_start|>`, Llama's `[INST]`. Text in the
data that spells that markup can close the tool result early, and what follows then reads as
if it came from outside the data. `encode_data` serialises the data as JSON and escapes every
character that such markup is built from, the way HTML-safe JSON escapes `<`: the model still
reads the text (`\\u003c/tool_response\\u003e`), but no template or tokenizer sees markup in it.
"""

from __future__ import annotations

import json
import re
from typing import Any

# JSON string escapes: the JSON stays valid and decodes to the same data.
_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "|": "\\u007c",
    "`": "\\u0060",
}
_MARKUP_CHARS = re.compile("[<>|`]")
# "[INST]" / "[/INST]" and "<<SYS>>" need no angle bracket to be markup.
_BRACKET_MARKUP = re.compile(r"\[(/?)(INST|SYS|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS)\]", re.I)


def neutralise(text: str) -> str:
    """`text` with the characters of chat markup escaped (for text outside JSON)."""
    escaped = _MARKUP_CHARS.sub(lambda m: _ESCAPES[m.group(0)], text)
    return _BRACKET_MARKUP.sub(lambda m: f"\\u005b{m.group(1)}{m.group(2)}]", escaped)


def encode_data(data: Any, indent: int | None = 2) -> str:
    """`data` as JSON (indented by `indent`) in which no string can spell chat markup.

    Outside strings JSON uses none of these characters, so escaping them in the serialised
    text escapes them inside strings only; `json.loads` gives back `data` unchanged."""
    return neutralise(json.dumps(data, indent=indent, ensure_ascii=False))
