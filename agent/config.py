"""Settings from the environment, and the one function that composes an agent from them.

`build_agent` is the single entry point for whoever runs the agent (the command line, the
Django seam, the evals):

```
TracedAgent(Agent(
    TracedProvider(RetryingProvider(<adapter from build_provider>)),
    TracedToolExecutor(ToolRegistry + release tools, trace context sent as headers),
    context=TracedContextManager(WindowManager(...)),
    reasoning=get_strategy(DETECTIVE_REASONING),
    store=<the caller's>,
    config=<from the prompt profile that suits the model>,
))
```

Environment variables (all optional; a `.env` file is not read):

| variable | meaning | default |
| --- | --- | --- |
| DETECTIVE_PROVIDER | anthropic, openai, openrouter, ollama, ... | the first with a key |
| DETECTIVE_MODEL | model name | the provider's default |
| DETECTIVE_BASE_URL | the provider API's base URL | the provider's default |
| ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENROUTER_API_KEY | provider keys | |
| DETECTIVE_API_KEY | a key for a local OpenAI-compatible server | |
| DETECTIVE_CONTEXT_WINDOW | context window override, in tokens | the model table |
| DETECTIVE_DATA_DIR | conversations, session logs and traces | ./data |
| DETECTIVE_API_URL | the release API's base URL | http://127.0.0.1:8000 |
| DETECTIVE_API_TOKEN | bearer token for the release API | |
| DETECTIVE_TOOL_TIMEOUT | seconds the release tools wait for the API | 10 |
| DETECTIVE_REASONING | direct, self_check, plan | direct |
| DETECTIVE_MAX_STEPS | model calls allowed per message | the prompt profile's (8) |
| DETECTIVE_MAX_RUN_EVENTS | events one run may save before it is stopped | 2000 |
| DETECTIVE_MAX_RUN_TEXT_CHARS | characters of streamed text per run | 200000 |
| DETECTIVE_MAX_RUN_OUTPUT_CHARS | characters of model output (text, tool calls) per run | 500000 |
| DETECTIVE_CONTEXT_STRATEGY | truncation, summarisation | truncation |
| DETECTIVE_PROMPT_PROFILE | auto, default, small | auto |
| DETECTIVE_CAPTURE_CONTENT | record prompts and completions in traces | false |
| OTEL_EXPORTER_OTLP_ENDPOINT | also export traces and metrics over OTLP/HTTP | |

The other standard OTEL_* variables (per-signal endpoints, OTEL_TRACES_EXPORTER,
OTEL_METRICS_EXPORTER, headers, service name, resource attributes) are read by
`agent.telemetry.setup.TelemetryConfig` and the SDK; docs/operating/observability.md lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent.context.manager import WindowManager
from agent.context.summarize import SUMMARY_INSTRUCTIONS, Summariser, render_transcript
from agent.errors import ConfigurationError
from agent.loop import Agent
from agent.messages import Conversation, Message, ToolCall
from agent.prompts import PromptProfile, profile_for
from agent.providers.factory import API_KEY_ENV, build_provider, canonical_provider
from agent.providers.http import ModelDeadlines
from agent.providers.protocol import ModelRequest, Provider
from agent.reasoning import get_strategy
from agent.retry import RetryingProvider, RetryPolicy
from agent.run_config import AgentConfig
from agent.store import ConversationStore
from agent.telemetry.agent_run import TracedAgent
from agent.telemetry.context_window import TracedContextManager
from agent.telemetry.logging import register_secret
from agent.telemetry.model_calls import TracedProvider
from agent.telemetry.setup import TelemetryConfig
from agent.telemetry.tool_calls import TracedToolExecutor
from agent.telemetry.trace_context import current_traceparent
from agent.tools.drilldown import register_drill_down_tools
from agent.tools.observability import register_observability_tools
from agent.tools.registry import ToolRegistry
from agent.tools.release_tools import DEFAULT_TIMEOUT_S, SUMMARY_TOOL, register_release_tools

PROVIDER_NAMES = "anthropic, openai, openrouter, ollama"
HOSTED_FIRST_BYTE_S = 30.0
LOCAL_FIRST_BYTE_S = 120.0
LOCAL_PROVIDERS = frozenset({"ollama", "local", "llamacpp", "lmstudio", "vllm"})


def _env(*names: str) -> Any:
    return Field(default=None, validation_alias=AliasChoices(*names))


class AgentSettings(BaseSettings):
    # An empty variable means unset, as for the site's own settings (docs/using/configuration.md).
    model_config = SettingsConfigDict(
        env_prefix="DETECTIVE_", extra="ignore", populate_by_name=True, env_ignore_empty=True
    )

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    anthropic_api_key: SecretStr | None = _env("ANTHROPIC_API_KEY", "anthropic_api_key")
    openai_api_key: SecretStr | None = _env("OPENAI_API_KEY", "openai_api_key")
    openrouter_api_key: SecretStr | None = _env("OPENROUTER_API_KEY", "openrouter_api_key")
    api_key: SecretStr | None = None
    context_window: int | None = Field(default=None, gt=0)
    data_dir: Path = Path("data")
    api_url: str = "http://127.0.0.1:8000"
    api_token: SecretStr | None = None
    tool_timeout: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    # Deadlines of one model call (agent/providers/http.py, ModelDeadlines): to connect, to
    # the first byte (None: 30 s, or 120 s for a model on this machine, which reads a long
    # prompt before it answers), between two chunks of a stream, and in all.
    model_connect_timeout: float = Field(default=10.0, gt=0)
    model_first_byte_timeout: float | None = Field(default=None, gt=0)
    model_idle_timeout: float = Field(default=30.0, gt=0)
    model_call_timeout: float = Field(default=300.0, gt=0)
    reasoning: str = "direct"
    max_steps: int | None = Field(default=None, ge=1)
    # Caps of one run (AgentConfig, agent/run_config.py): past one, the run stops, saying so.
    max_run_events: int = Field(default=2_000, ge=10)
    max_run_text_chars: int = Field(default=200_000, ge=1)
    max_run_output_chars: int = Field(default=500_000, ge=1)
    context_strategy: str = "truncation"
    prompt_profile: str = "auto"
    capture_content: bool = False
    otel_exporter_otlp_endpoint: str | None = _env(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "otel_exporter_otlp_endpoint"
    )

    def provider_name(self) -> str:
        """The configured provider, or the first whose key is set."""
        if self.provider and self.provider.strip():
            return canonical_provider(self.provider)
        for name in API_KEY_ENV:
            if self._key_for(name):
                return name
        raise ConfigurationError(
            "No provider configured. To assess offline, without an API key, install the "
            "local model with `uv run manage.py local_model install` and restart "
            "`uv run manage.py up`, which then serves it. Or set DETECTIVE_PROVIDER "
            f"({PROVIDER_NAMES}) and, for a hosted one, its API key (ANTHROPIC_API_KEY, "
            "OPENAI_API_KEY or OPENROUTER_API_KEY)."
        )

    def model_deadlines(self, provider: str) -> ModelDeadlines:
        first_byte = self.model_first_byte_timeout or (
            LOCAL_FIRST_BYTE_S if provider in LOCAL_PROVIDERS else HOSTED_FIRST_BYTE_S
        )
        return ModelDeadlines(
            connect=self.model_connect_timeout,
            first_byte=first_byte,
            idle=self.model_idle_timeout,
            total=self.model_call_timeout,
        )

    def api_key_for(self, provider: str) -> str | None:
        return self._key_for(provider) or _secret(self.api_key)

    def telemetry_config(self) -> TelemetryConfig:
        return TelemetryConfig(
            data_dir=self.data_dir,
            otlp_endpoint=self.otel_exporter_otlp_endpoint or None,
            capture_content=self.capture_content,
        )

    @property
    def conversations_dir(self) -> Path:
        return self.data_dir / "conversations"

    def _key_for(self, provider: str) -> str | None:
        keys: Mapping[str, SecretStr | None] = {
            "anthropic": self.anthropic_api_key,
            "openai": self.openai_api_key,
            "openrouter": self.openrouter_api_key,
        }
        return _secret(keys.get(provider))


def _secret(value: SecretStr | None) -> str | None:
    if value is None:
        return None
    return value.get_secret_value().strip() or None


def build_model_provider(settings: AgentSettings, **options: Any) -> Provider:
    """The bare adapter the settings describe (no retry, no tracing). `options` go to the
    adapter's constructor: `client=` shares one HTTP client between many adapters (the
    evals run many agents at once; each client costs a TLS context)."""
    name = settings.provider_name()
    key = settings.api_key_for(name)
    register_secret(key)  # scrubbed from every log line from now on
    if settings.context_window is not None:
        options["context_window"] = settings.context_window
    options.setdefault("timeout", settings.model_deadlines(name))
    return build_provider(name, settings.model or None, settings.base_url or None, key, **options)


_STRATEGY_NAMES = {
    "truncation": "truncation",
    "truncate": "truncation",
    "summarization": "summarization",
    "summarisation": "summarization",
    "summary": "summarization",
}


def _window_manager(
    strategy: str, adapter: Provider, summarising: Provider, response_tokens: int
) -> WindowManager:
    name = _STRATEGY_NAMES.get(strategy.strip().lower())
    if name is None:
        raise ConfigurationError(
            f"Unknown context strategy {strategy!r} (use truncation or summarization)"
        )
    return WindowManager(
        # The adapter's window already includes DETECTIVE_CONTEXT_WINDOW and, for Ollama,
        # is the num_ctx it sends: the budget and the server agree.
        adapter.capabilities().context_window,
        response_tokens=response_tokens,
        strategy=name,  # type: ignore[arg-type]
        summariser=provider_summariser(summarising) if name == "summarization" else None,
    )


def provider_summariser(provider: Provider, max_tokens: int = 512) -> Summariser:
    """A summariser for the summarisation strategy: one model call over a transcript of
    the messages to condense, without tools."""

    async def summarise(messages: list[Message]) -> str:
        request = ModelRequest(
            system=SUMMARY_INSTRUCTIONS,
            messages=[Message.user(render_transcript(messages))],
            max_tokens=max_tokens,
        )
        response = await provider.complete(request)
        return response.message.content

    return summarise


def _opening_calls(profile: PromptProfile, release_id: str | None) -> tuple[ToolCall, ...]:
    if not (profile.read_summary_first and release_id):
        return ()
    # The id the transcript and the run page show for it; providers only need it to match
    # the result's (Anthropic's ids are letters, digits, "_" and "-").
    call = ToolCall(
        id="detective_opening_summary",
        name=SUMMARY_TOOL,
        arguments={"release_id": release_id},
    )
    return (call,)


def build_agent(
    settings: AgentSettings,
    *,
    release_id: str | None = None,
    api_token: str | None = None,
    store: ConversationStore | None = None,
    http_client: httpx.AsyncClient | None = None,
    provider: Provider | None = None,
    conversation: Conversation | None = None,
) -> TracedAgent:
    """Compose the agent the settings describe.

    - `release_id`: the release under assessment; reports can then be filed for it alone.
    - `api_token`: the release API token for this run (else DETECTIVE_API_TOKEN).
    - `store`: where the conversation and its events are saved (none: kept in memory).
    - `http_client`: the client the release tools use (the caller keeps ownership).
    - `provider`: a ready adapter instead of the one the settings describe (tests, evals);
      it is still wrapped in retry and tracing.
    - `conversation`: a saved conversation to continue.

    Telemetry is configured by the process owner (`configure_telemetry`), not here; the
    wrappers use whatever is configured, or nothing. Close the agent with `aclose()`.
    """
    adapter = provider if provider is not None else build_model_provider(settings)
    capture = settings.capture_content
    model_provider = TracedProvider(
        RetryingProvider(adapter, RetryPolicy()), capture_content=capture
    )

    token = api_token or _secret(settings.api_token)
    register_secret(token)
    registry = ToolRegistry()
    profile = profile_for(adapter.name, adapter.model, settings.prompt_profile)
    release_tools = register_release_tools(
        registry,
        settings.api_url,
        token=token,
        release_id=release_id,
        client=http_client,
        timeout_s=settings.tool_timeout,
        # The release API joins the conversation's trace.
        extra_headers=current_traceparent,
        with_summary=profile.file_summary,
        brief_summary=profile.brief_summary,
    )
    if profile.drill_down:
        register_drill_down_tools(registry, release_tools)
        register_observability_tools(registry, release_tools)
    tools = TracedToolExecutor(registry, capture_content=capture)

    config = AgentConfig(
        system_prompt=profile.system_prompt,
        max_steps=settings.max_steps or profile.max_steps,
        temperature=profile.temperature,
        max_text_only_nudges=profile.max_text_only_nudges,
        max_events=settings.max_run_events,
        max_text_chars=settings.max_run_text_chars,
        max_output_chars=settings.max_run_output_chars,
        opening_calls=_opening_calls(profile, release_id),
        assessing=release_id is not None,
    )
    window = _window_manager(settings.context_strategy, adapter, model_provider, config.max_tokens)
    # Only the summarising strategy calls the model while fitting.
    context = TracedContextManager(window, calls_model=window.strategy == "summarization")
    agent = Agent(
        model_provider,
        tools,
        context=context,
        reasoning=get_strategy(settings.reasoning),
        store=store,
        config=config,
        conversation=conversation,
    )
    agent.close_with(release_tools.aclose)
    if release_id is not None:
        agent.conversation.metadata["release_id"] = release_id
    agent.conversation.metadata["prompt_profile"] = profile.name
    agent.conversation.metadata["prompt_profile_reads"] = profile.reads
    return TracedAgent(agent, capture_content=capture)
