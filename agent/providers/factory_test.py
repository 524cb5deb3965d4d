from __future__ import annotations

from typing import Any

import pytest

from agent.errors import ConfigurationError
from agent.providers.anthropic import AnthropicProvider
from agent.providers.factory import PROVIDERS, build_provider, provider_from_env
from agent.providers.ollama import OllamaProvider
from agent.providers.openai_compat import OpenAICompatProvider
from agent.providers.protocol import Provider

KEY = "sk-factory-test-0123456789"


@pytest.mark.parametrize(
    ("provider", "kwargs", "cls", "name", "model", "base_url"),
    [
        (
            "anthropic",
            {"api_key": KEY},
            AnthropicProvider,
            "anthropic",
            "claude-sonnet-4-5",
            "https://api.anthropic.com",
        ),
        (
            "Claude",
            {"api_key": KEY},
            AnthropicProvider,
            "anthropic",
            "claude-sonnet-4-5",
            "https://api.anthropic.com",
        ),
        (
            "openai",
            {"api_key": KEY},
            OpenAICompatProvider,
            "openai",
            "gpt-4o-mini",
            "https://api.openai.com/v1",
        ),
        (
            "openrouter",
            {"api_key": KEY},
            OpenAICompatProvider,
            "openrouter",
            "openai/gpt-4o-mini",
            "https://openrouter.ai/api/v1",
        ),
        ("ollama", {}, OllamaProvider, "ollama", "qwen2.5:7b", "http://127.0.0.1:11434"),
        (
            "vllm",
            {"model": "Qwen/Qwen2.5-7B-Instruct"},
            OpenAICompatProvider,
            "vllm",
            "Qwen/Qwen2.5-7B-Instruct",
            "http://127.0.0.1:8000/v1",
        ),
        (
            "llamacpp",
            {},
            OpenAICompatProvider,
            "llamacpp",
            "local-model",
            "http://127.0.0.1:8080/v1",
        ),
        (
            "llama.cpp",
            {},
            OpenAICompatProvider,
            "llamacpp",
            "local-model",
            "http://127.0.0.1:8080/v1",
        ),
        (
            "lmstudio",
            {"model": "qwen2.5-7b"},
            OpenAICompatProvider,
            "lmstudio",
            "qwen2.5-7b",
            "http://127.0.0.1:1234/v1",
        ),
        (
            "local",
            {"base_url": "http://gpu-box:8080/v1"},
            OpenAICompatProvider,
            "local",
            "local-model",
            "http://gpu-box:8080/v1",
        ),
        (
            "openai-compatible",
            {"model": "m", "base_url": "https://llm.internal/v1/"},
            OpenAICompatProvider,
            "openai-compatible",
            "m",
            "https://llm.internal/v1",
        ),
    ],
)
def test_build_provider(
    provider: str, kwargs: dict[str, Any], cls: type, name: str, model: str, base_url: str
) -> None:
    built = build_provider(provider, **kwargs)
    assert isinstance(built, cls)
    assert isinstance(built, Provider)
    assert built.name == name
    assert built.model == model
    assert built._http.base_url == base_url  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("provider", "env_var"),
    [
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("openai", "OPENAI_API_KEY"),
        ("openrouter", "OPENROUTER_API_KEY"),
    ],
)
def test_missing_key_names_the_env_var(provider: str, env_var: str) -> None:
    with pytest.raises(ConfigurationError, match=env_var):
        build_provider(provider)


def test_unknown_provider_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError) as caught:
        build_provider("gemini")
    message = str(caught.value)
    assert "'gemini'" in message
    for valid in ("anthropic", "openai", "openrouter", "ollama", "local"):
        assert valid in message
    assert set(PROVIDERS) >= {
        "anthropic",
        "openai",
        "openrouter",
        "ollama",
        "vllm",
        "llamacpp",
        "local",
    }


def test_base_url_needs_a_scheme() -> None:
    with pytest.raises(ConfigurationError, match="http://"):
        build_provider("ollama", base_url="localhost:11434")


def test_options_reach_the_adapter() -> None:
    built = build_provider("ollama", context_window=4096, timeout=5.0)
    assert built.capabilities().context_window == 4096


@pytest.mark.parametrize(
    ("environ", "name", "model"),
    [
        ({}, "ollama", "qwen2.5:7b"),
        ({"ANTHROPIC_API_KEY": KEY}, "anthropic", "claude-sonnet-4-5"),
        ({"OPENAI_API_KEY": KEY}, "openai", "gpt-4o-mini"),
        ({"OPENROUTER_API_KEY": KEY}, "openrouter", "openai/gpt-4o-mini"),
        (
            {
                "DETECTIVE_PROVIDER": "openai",
                "OPENAI_API_KEY": KEY,
                "ANTHROPIC_API_KEY": KEY,
                "DETECTIVE_MODEL": "gpt-4.1",
            },
            "openai",
            "gpt-4.1",
        ),
        (
            {"DETECTIVE_PROVIDER": " Ollama ", "DETECTIVE_MODEL": "llama3.1:8b"},
            "ollama",
            "llama3.1:8b",
        ),
    ],
)
def test_provider_from_env(environ: dict[str, str], name: str, model: str) -> None:
    built = provider_from_env(environ)
    assert (built.name, built.model) == (name, model)


def test_provider_from_env_missing_key() -> None:
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        provider_from_env({"DETECTIVE_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "  "})


def test_provider_from_env_reads_base_url_and_context_window() -> None:
    built = provider_from_env(
        {
            "DETECTIVE_PROVIDER": "local",
            "DETECTIVE_BASE_URL": "http://10.0.0.5:8080/v1",
            "DETECTIVE_CONTEXT_WINDOW": "32768",
            "DETECTIVE_API_KEY": KEY,
        }
    )
    assert built._http.base_url == "http://10.0.0.5:8080/v1"  # type: ignore[attr-defined]
    assert built.capabilities().context_window == 32_768
    assert built._http._headers["Authorization"] == f"Bearer {KEY}"  # type: ignore[attr-defined]


def test_provider_from_env_rejects_a_bad_context_window() -> None:
    with pytest.raises(ConfigurationError, match="DETECTIVE_CONTEXT_WINDOW"):
        provider_from_env({"DETECTIVE_CONTEXT_WINDOW": "lots"})


def test_provider_from_env_passes_the_openrouter_app_url() -> None:
    built = provider_from_env(
        {
            "DETECTIVE_PROVIDER": "openrouter",
            "OPENROUTER_API_KEY": KEY,
            "DETECTIVE_APP_URL": "https://d.example",
        }
    )
    assert built._http._headers["HTTP-Referer"] == "https://d.example"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("0.0.0.0:11434", "http://127.0.0.1:11434"),
        ("gpu-box", "http://gpu-box:11434"),
        ("https://ollama.internal", "https://ollama.internal"),
    ],
)
def test_ollama_host_is_honoured(host: str, url: str) -> None:
    built = provider_from_env({"OLLAMA_HOST": host})
    assert built._http.base_url == url  # type: ignore[attr-defined]


def test_detective_base_url_wins_over_ollama_host() -> None:
    built = provider_from_env({"OLLAMA_HOST": "gpu-box", "DETECTIVE_BASE_URL": "http://a:1"})
    assert built._http.base_url == "http://a:1"  # type: ignore[attr-defined]


def test_provider_from_env_defaults_to_the_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (
        "DETECTIVE_PROVIDER",
        "DETECTIVE_MODEL",
        "DETECTIVE_BASE_URL",
        "DETECTIVE_CONTEXT_WINDOW",
        "OLLAMA_HOST",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENROUTER_API_KEY",
        "DETECTIVE_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DETECTIVE_PROVIDER", "llamacpp")
    assert provider_from_env().name == "llamacpp"
