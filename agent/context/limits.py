"""How many tokens each model's context window holds.

Model names come in many spellings: "claude-sonnet-4-5", "anthropic/claude-3.5-sonnet"
(OpenRouter), "llama3.1:8b" (Ollama), "Qwen/Qwen2.5-Coder-1.5B-Instruct" (Hugging Face,
vLLM). A name is reduced to its last path segment, lower-cased, with "-", "_" and spaces
removed, and matched against the table by its longest prefix, so that "gpt-4o-mini" finds
"gpt-4o" and "gpt-4.1-nano" finds "gpt-4.1" rather than "gpt-4".

For Ollama the window that matters is the `num_ctx` the provider asks for, not the model's
maximum: pass it as the override.
"""

from __future__ import annotations

import re

DEFAULT_CONTEXT_WINDOW = 8192

CONTEXT_WINDOWS: dict[str, int] = {
    # Anthropic
    "claude": 200_000,
    # OpenAI
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # Meta Llama
    "llama3": 8_192,
    "llama3.1": 131_072,
    "llama3.2": 131_072,
    "llama3.3": 131_072,
    # Qwen
    "qwen2.5": 32_768,
    "qwen2.5-coder": 32_768,
    "qwen2.5-coder-1.5b": 32_768,
    # Mistral
    "mistral": 32_768,
    "mixtral": 32_768,
}

_SEPARATORS = re.compile(r"[-_\s]")


def _squash(name: str) -> str:
    return _SEPARATORS.sub("", name.strip().rsplit("/", 1)[-1].lower())


_SQUASHED = sorted(
    ((_squash(key), window) for key, window in CONTEXT_WINDOWS.items()),
    key=lambda item: len(item[0]),
    reverse=True,
)


def context_window_for(model: str, override: int | None = None) -> int:
    """The model's context window in tokens: the override when given, else the table's
    longest matching prefix, else DEFAULT_CONTEXT_WINDOW."""
    if override is not None:
        if override <= 0:
            raise ValueError(f"a context window must be positive, not {override}")
        return override
    squashed = _squash(model)
    for prefix, window in _SQUASHED:
        if squashed.startswith(prefix):
            return window
    return DEFAULT_CONTEXT_WINDOW
