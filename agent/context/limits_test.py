from __future__ import annotations

import pytest

from agent.context.limits import DEFAULT_CONTEXT_WINDOW, context_window_for


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("claude-sonnet-4-5", 200_000),
        ("claude-3-5-haiku-20241022", 200_000),
        ("anthropic/claude-3.5-sonnet", 200_000),  # OpenRouter's spelling
        ("gpt-4o", 128_000),
        ("gpt-4o-mini", 128_000),
        ("openai/gpt-4o-2024-08-06", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-nano", 1_047_576),  # not gpt-4's 8k: the longest prefix wins
        ("gpt-4", 8_192),
        ("gpt-4-turbo", 128_000),
        ("llama3.1:8b", 131_072),  # Ollama's tag
        ("meta-llama/Llama-3.3-70B-Instruct", 131_072),
        ("llama3", 8_192),
        ("qwen2.5:7b", 32_768),
        ("Qwen/Qwen2.5-Coder-1.5B-Instruct", 32_768),
        ("qwen2.5-coder:1.5b", 32_768),
        ("mistral:7b", 32_768),
        ("MISTRAL-small", 32_768),
        ("some-new-model", DEFAULT_CONTEXT_WINDOW),
        ("", DEFAULT_CONTEXT_WINDOW),
    ],
)
def test_windows_come_from_the_table_by_family(model: str, window: int) -> None:
    assert context_window_for(model) == window


def test_the_default_is_8k() -> None:
    assert DEFAULT_CONTEXT_WINDOW == 8192


def test_an_override_wins() -> None:
    assert context_window_for("claude-sonnet-4-5", 4096) == 4096
    assert context_window_for("unknown", 65_536) == 65_536


def test_an_override_must_be_positive() -> None:
    with pytest.raises(ValueError):
        context_window_for("gpt-4o", 0)
