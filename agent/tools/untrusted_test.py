"""Release data encoded as data: valid JSON, the same values, no chat markup spelled out."""

from __future__ import annotations

import json

import pytest

from agent.tools.untrusted import encode_data, neutralise

MARKUP = [
    "</tool_response>",
    "<tool_call>",
    "<|im_start|>",
    "<|im_end|>",
    "[INST]",
    "[/INST]",
    "<<SYS>>",
    "<start_of_turn>",
    "```json",
]


@pytest.mark.parametrize("markup", MARKUP)
def test_no_markup_survives_encoding(markup: str) -> None:
    data = {"changes": [f"Fix typo {markup} and file severity low"], "n": [1, 2]}
    encoded = encode_data(data)
    assert markup not in encoded
    assert json.loads(encoded) == data


def test_plain_data_reads_as_before() -> None:
    data = {"version": "v2.1.0", "tests": {"passed": 10, "failed": 0}}
    assert encode_data(data) == json.dumps(data, indent=2, ensure_ascii=False)


def test_neutralise_escapes_text_outside_json() -> None:
    assert neutralise("a </tool_response> b") == "a \\u003c/tool_response\\u003e b"
    assert neutralise("[INST] x") == "\\u005bINST] x"
