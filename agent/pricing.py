"""What a model call costs, estimated from a price table.

Prices are USD per million tokens as the vendors publish them; they drift, so the figure
is an estimate for dashboards and metrics, never a bill. Lookup is by longest prefix of a
normalised model id, so dated snapshots ("claude-sonnet-4-20250514", "gpt-4o-2024-08-06")
and OpenRouter ids ("anthropic/claude-sonnet-4", "openai/gpt-4o-mini") find their family.
Local models cost nothing; a model we know nothing about has no estimate (None), rather
than a wrong one.

Usage semantics: `Usage.input_tokens` is the whole prompt, and `cached_input_tokens` is the
part of it the provider served from its cache, billed at the cached rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.messages import Usage

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class ModelPrice:
    input_per_mtok: float
    output_per_mtok: float
    # Cache reads, where the vendor bills them differently from ordinary input.
    cached_input_per_mtok: float | None = None


FREE = ModelPrice(0.0, 0.0, 0.0)

# Keys are normalised ids (see `normalise_model_id`): lower case, no vendor prefix, and
# Claude version dots written as dashes. Longer keys win over their own prefixes.
PRICES: dict[str, ModelPrice] = {
    # Anthropic: cache reads cost a tenth of ordinary input.
    "claude-opus-4": ModelPrice(15.0, 75.0, 1.50),
    "claude-opus-4-5": ModelPrice(5.0, 25.0, 0.50),
    "claude-opus-4-6": ModelPrice(5.0, 25.0, 0.50),
    "claude-sonnet-4": ModelPrice(3.0, 15.0, 0.30),
    "claude-haiku-4": ModelPrice(1.0, 5.0, 0.10),
    "claude-3-7-sonnet": ModelPrice(3.0, 15.0, 0.30),
    "claude-3-5-sonnet": ModelPrice(3.0, 15.0, 0.30),
    "claude-3-5-haiku": ModelPrice(0.80, 4.0, 0.08),
    "claude-3-opus": ModelPrice(15.0, 75.0, 1.50),
    "claude-3-haiku": ModelPrice(0.25, 1.25, 0.03),
    # OpenAI
    "gpt-4o": ModelPrice(2.50, 10.0, 1.25),
    "gpt-4o-mini": ModelPrice(0.15, 0.60, 0.075),
    "gpt-4.1": ModelPrice(2.0, 8.0, 0.50),
    "gpt-4.1-mini": ModelPrice(0.40, 1.60, 0.10),
    "gpt-4.1-nano": ModelPrice(0.10, 0.40, 0.025),
}

# Vendor prefixes of OpenRouter-style ids; what follows is the vendor's own model id.
_VENDOR_PREFIXES = ("anthropic/", "openai/")

# Models served on the user's own machine. Matched on the provider name or a model-id
# prefix such as "ollama/llama3.1".
LOCAL_PROVIDERS = frozenset({"ollama", "local", "llama.cpp", "llamacpp", "lmstudio", "vllm"})


def normalise_model_id(model: str) -> str:
    model_id = model.strip().lower()
    for prefix in _VENDOR_PREFIXES:
        if model_id.startswith(prefix):
            model_id = model_id[len(prefix) :]
            break
    if model_id.startswith("claude"):
        # OpenRouter writes "claude-3.5-sonnet" where Anthropic writes "claude-3-5-sonnet".
        model_id = model_id.replace(".", "-")
    return model_id


def is_local(model: str, provider: str | None = None) -> bool:
    if provider and provider.lower() in LOCAL_PROVIDERS:
        return True
    head, sep, _ = model.lower().partition("/")
    return bool(sep) and head in LOCAL_PROVIDERS


# (model, provider) -> the PRICES key its price is under (None: none; _LOCAL: free), with
# the size of PRICES it was found at: every model call is priced twice (the run's tally and
# its span), and the normalising and the scan of the table were most of that. A key added
# (or taken back) changes the size, which drops what was found; a price changed in place is
# read from PRICES anew anyway.
_LOCAL = "\x00local"
_price_keys: dict[tuple[str, str | None], str | None] = {}
_price_keys_size = -1
_PRICE_KEYS_KEPT = 256


def _price_key(model: str, provider: str | None) -> str | None:
    if is_local(model, provider):
        return _LOCAL
    model_id = normalise_model_id(model)
    best: str | None = None
    for key in PRICES:
        if model_id.startswith(key) and (best is None or len(key) > len(best)):
            best = key
    return best


def price_for(model: str, provider: str | None = None) -> ModelPrice | None:
    """The price of `model`, or None when the table does not know it."""
    global _price_keys_size
    if _price_keys_size != len(PRICES) or len(_price_keys) >= _PRICE_KEYS_KEPT:
        _price_keys.clear()
        _price_keys_size = len(PRICES)
    asked = (model, provider)
    try:
        key = _price_keys[asked]
    except KeyError:
        key = _price_keys[asked] = _price_key(model, provider)
    if key is None:
        return None
    return FREE if key is _LOCAL else PRICES.get(key)


def estimate_cost(model: str, usage: Usage, provider: str | None = None) -> float | None:
    """Estimated USD cost of `usage` on `model`; None for a model with no known price."""
    price = price_for(model, provider)
    if price is None:
        return None
    cached = min(max(usage.cached_input_tokens or 0, 0), usage.input_tokens)
    cached_rate = (
        price.cached_input_per_mtok
        if price.cached_input_per_mtok is not None
        else price.input_per_mtok
    )
    cost = (
        (usage.input_tokens - cached) * price.input_per_mtok
        + cached * cached_rate
        + usage.output_tokens * price.output_per_mtok
    )
    return cost / PER_MILLION
