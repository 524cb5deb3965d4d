"""Choosing and building a provider from configuration.

Environment (read by `provider_from_env`):

- `DETECTIVE_PROVIDER`: anthropic, openai, openrouter, ollama, vllm, llamacpp, lmstudio,
  local (llama.cpp's llama-server at a URL you give) or openai-compatible.
- `DETECTIVE_MODEL`: the model name; each provider has a default, except vllm, lmstudio
  and openai-compatible, which serve whatever they were started with.
- `DETECTIVE_BASE_URL`: the API's base URL; required for local and openai-compatible.
- `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `OPENROUTER_API_KEY`: the keys.
- Optional: `DETECTIVE_CONTEXT_WINDOW` (override the model's context window, in tokens),
  `DETECTIVE_API_KEY` (a key for a local server started with one), `DETECTIVE_APP_URL`
  (the site URL OpenRouter shows for attribution), `OLLAMA_HOST` (Ollama's own setting,
  used when `DETECTIVE_BASE_URL` is unset).

Without `DETECTIVE_PROVIDER` the first provider whose key is set is used (Anthropic,
OpenAI, OpenRouter), and Ollama when no key is set, since it needs none.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from agent.errors import ConfigurationError
from agent.providers.anthropic import AnthropicProvider
from agent.providers.ollama import OllamaProvider
from agent.providers.openai_compat import PRESETS, OpenAICompatProvider
from agent.providers.protocol import Provider

PROVIDERS = ("anthropic", "ollama", *PRESETS)
ALIASES = {
    "claude": "anthropic",
    "openai_compatible": "openai-compatible",
    "openai-compat": "openai-compatible",
    "llama.cpp": "llamacpp",
    "llama-cpp": "llamacpp",
    "llama-server": "llamacpp",
    "lm-studio": "lmstudio",
}
API_KEY_ENV = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}


def canonical_provider(provider: str) -> str:
    key = provider.strip().lower()
    key = ALIASES.get(key, key)
    if key not in PROVIDERS:
        raise ConfigurationError(
            f"unknown provider {provider!r}; valid providers: {', '.join(PROVIDERS)}"
        )
    return key


def build_provider(
    provider: str,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    **options: Any,
) -> Provider:
    """Build the adapter for `provider`. `options` go to its constructor (timeout,
    client, context_window, ...)."""
    key = canonical_provider(provider)
    env_var = API_KEY_ENV.get(key)
    if env_var and not api_key:
        raise ConfigurationError(
            f"the {key} provider needs an API key: set {env_var} in the environment"
        )
    if base_url and not base_url.startswith(("http://", "https://")):
        raise ConfigurationError(f"base URL {base_url!r} must start with http:// or https://")
    if key == "anthropic":
        return AnthropicProvider(model or "claude-sonnet-4-5", base_url, api_key, **options)
    if key == "ollama":
        return OllamaProvider(model or "qwen2.5:7b", base_url, api_key, **options)
    return OpenAICompatProvider(model, base_url, api_key, preset=key, **options)


def provider_from_env(environ: Mapping[str, str] | None = None, **options: Any) -> Provider:
    """Build the provider the environment asks for."""
    env = os.environ if environ is None else environ

    def get(name: str) -> str | None:
        value = env.get(name, "").strip()
        return value or None

    provider = get("DETECTIVE_PROVIDER") or _detect(get)
    key = canonical_provider(provider)
    base_url = get("DETECTIVE_BASE_URL")
    if base_url is None and key == "ollama" and get("OLLAMA_HOST"):
        base_url = _ollama_host_url(get("OLLAMA_HOST") or "")
    env_var = API_KEY_ENV.get(key)
    api_key = get("DETECTIVE_API_KEY") or (get(env_var) if env_var else None)
    window = get("DETECTIVE_CONTEXT_WINDOW")
    if window is not None:
        try:
            options.setdefault("context_window", int(window))
        except ValueError:
            raise ConfigurationError(
                f"DETECTIVE_CONTEXT_WINDOW must be a number of tokens, not {window!r}"
            ) from None
    if key == "openrouter" and get("DETECTIVE_APP_URL"):
        options.setdefault("app_url", get("DETECTIVE_APP_URL"))
    return build_provider(key, get("DETECTIVE_MODEL"), base_url, api_key, **options)


def _detect(get: Callable[[str], str | None]) -> str:
    for provider, env_var in API_KEY_ENV.items():
        if get(env_var):
            return provider
    return "ollama"


def _ollama_host_url(host: str) -> str:
    """OLLAMA_HOST as Ollama reads it: "0.0.0.0:11434", "myhost", or a full URL."""
    if host.startswith(("http://", "https://")):
        return host
    host = host.replace("0.0.0.0", "127.0.0.1")  # a listen address, not a destination
    return f"http://{host}" if ":" in host else f"http://{host}:11434"
