from __future__ import annotations

import pytest

from agent.messages import Usage
from agent.pricing import (
    FREE,
    ModelPrice,
    estimate_cost,
    is_local,
    normalise_model_id,
    price_for,
)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4-20250514", ModelPrice(3.0, 15.0, 0.30)),
        ("claude-sonnet-4-5-20250929", ModelPrice(3.0, 15.0, 0.30)),
        ("claude-opus-4-1-20250805", ModelPrice(15.0, 75.0, 1.50)),
        ("claude-opus-4-5-20251101", ModelPrice(5.0, 25.0, 0.50)),
        ("claude-haiku-4-5", ModelPrice(1.0, 5.0, 0.10)),
        ("claude-3-5-sonnet-20241022", ModelPrice(3.0, 15.0, 0.30)),
        ("claude-3-5-haiku-latest", ModelPrice(0.80, 4.0, 0.08)),
        ("gpt-4o-2024-08-06", ModelPrice(2.50, 10.0, 1.25)),
        ("gpt-4o-mini", ModelPrice(0.15, 0.60, 0.075)),
        ("gpt-4.1", ModelPrice(2.0, 8.0, 0.50)),
        ("gpt-4.1-mini-2025-04-14", ModelPrice(0.40, 1.60, 0.10)),
        ("gpt-4.1-nano", ModelPrice(0.10, 0.40, 0.025)),
        ("anthropic/claude-sonnet-4", ModelPrice(3.0, 15.0, 0.30)),
        ("anthropic/claude-3.5-sonnet", ModelPrice(3.0, 15.0, 0.30)),
        ("openai/gpt-4o-mini", ModelPrice(0.15, 0.60, 0.075)),
        ("GPT-4o", ModelPrice(2.50, 10.0, 1.25)),
    ],
)
def test_price_for_finds_the_longest_matching_family(model: str, expected: ModelPrice) -> None:
    assert price_for(model) == expected


def test_unknown_model_has_no_price() -> None:
    assert price_for("mystery-model-7b") is None
    assert estimate_cost("mystery-model-7b", Usage(input_tokens=10)) is None


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("llama3.1:8b", "ollama"),
        ("qwen2.5", "local"),
        ("whatever", "llama.cpp"),
        ("ollama/llama3.1", None),
        ("local/phi-4", None),
    ],
)
def test_local_models_are_free(model: str, provider: str | None) -> None:
    assert is_local(model, provider)
    assert price_for(model, provider) == FREE
    usage = Usage(input_tokens=1000, output_tokens=1000)
    assert estimate_cost(model, usage, provider) == 0.0


def test_hosted_model_is_not_local() -> None:
    assert not is_local("anthropic/claude-sonnet-4", "openrouter")
    assert not is_local("gpt-4o")


def test_normalise_model_id() -> None:
    assert normalise_model_id(" Anthropic/Claude-Sonnet-4.5 ") == "claude-sonnet-4-5"
    assert normalise_model_id("openai/gpt-4.1") == "gpt-4.1"


def test_estimate_cost_bills_input_and_output_per_million() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000)
    assert estimate_cost("gpt-4o", usage) == pytest.approx(2.50 + 1.0)


def test_estimate_cost_bills_cached_input_at_the_cached_rate() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=0, cached_input_tokens=400_000)
    # 600k ordinary at $3, 400k cached at $0.30
    assert estimate_cost("claude-sonnet-4", usage) == pytest.approx(1.80 + 0.12)


def test_cached_tokens_never_exceed_the_prompt() -> None:
    usage = Usage(input_tokens=100, output_tokens=0, cached_input_tokens=500)
    assert estimate_cost("gpt-4o", usage) == pytest.approx(100 * 1.25 / 1e6)


def test_cached_input_without_a_cached_rate_uses_the_input_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent import pricing

    monkeypatch.setitem(pricing.PRICES, "plain-model", ModelPrice(1.0, 2.0))
    usage = Usage(input_tokens=1_000_000, output_tokens=0, cached_input_tokens=500_000)
    assert estimate_cost("plain-model", usage) == pytest.approx(1.0)


def test_a_price_added_or_changed_after_a_lookup_is_the_one_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent import pricing

    assert price_for("house-model-7") is None
    monkeypatch.setitem(pricing.PRICES, "house-model", ModelPrice(1.0, 2.0))
    assert price_for("house-model-7") == ModelPrice(1.0, 2.0)
    monkeypatch.setitem(pricing.PRICES, "house-model", ModelPrice(3.0, 4.0))
    assert price_for("house-model-7") == ModelPrice(3.0, 4.0)
    monkeypatch.undo()
    assert price_for("house-model-7") is None
