from __future__ import annotations

import asyncio

import httpx
import pytest
import respx

from agent.config import AgentSettings, build_agent, build_model_provider, provider_summariser
from agent.context.manager import WindowManager
from agent.errors import ConfigurationError
from agent.messages import Message, ToolCall
from agent.prompts import DEFAULT_SYSTEM_PROMPT, SMALL_MODEL_SYSTEM_PROMPT
from agent.providers.anthropic import AnthropicProvider
from agent.providers.ollama import OllamaProvider
from agent.providers.openai_compat import OpenAICompatProvider
from agent.reasoning import SelfCheckStrategy
from agent.retry import RetryingProvider
from agent.store import InMemoryStore
from agent.telemetry.agent_run import TracedAgent
from agent.telemetry.model_calls import TracedProvider
from agent.testing.fakes import ScriptedProvider, reply

ENV_NAMES = (
    "DETECTIVE_PROVIDER",
    "DETECTIVE_MODEL",
    "DETECTIVE_BASE_URL",
    "DETECTIVE_API_KEY",
    "DETECTIVE_API_URL",
    "DETECTIVE_API_TOKEN",
    "DETECTIVE_DATA_DIR",
    "DETECTIVE_REASONING",
    "DETECTIVE_MAX_STEPS",
    "DETECTIVE_CONTEXT_STRATEGY",
    "DETECTIVE_CONTEXT_WINDOW",
    "DETECTIVE_PROMPT_PROFILE",
    "DETECTIVE_CAPTURE_CONTENT",
    "DETECTIVE_TOOL_TIMEOUT",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def test_settings_read_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("DETECTIVE_PROVIDER", "openrouter")
    monkeypatch.setenv("DETECTIVE_MODEL", "anthropic/claude-3.5-haiku")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-secret-value")
    monkeypatch.setenv("DETECTIVE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DETECTIVE_API_URL", "http://api.test")
    monkeypatch.setenv("DETECTIVE_API_TOKEN", "release-token-123")
    monkeypatch.setenv("DETECTIVE_REASONING", "self_check")
    monkeypatch.setenv("DETECTIVE_MAX_STEPS", "5")
    monkeypatch.setenv("DETECTIVE_CAPTURE_CONTENT", "true")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    settings = AgentSettings()
    assert settings.provider_name() == "openrouter"
    assert settings.api_key_for("openrouter") == "sk-or-secret-value"
    assert settings.max_steps == 5
    assert settings.reasoning == "self_check"
    assert settings.conversations_dir == tmp_path / "conversations"
    telemetry = settings.telemetry_config()
    assert telemetry.otlp_endpoint == "http://collector:4318"
    assert telemetry.capture_content is True
    assert telemetry.traces_dir == tmp_path / "traces"
    assert "sk-or-secret-value" not in repr(settings)
    assert "release-token-123" not in repr(settings)


def test_defaults() -> None:
    settings = AgentSettings()
    assert settings.api_url == "http://127.0.0.1:8000"
    assert str(settings.data_dir) == "data"
    assert settings.reasoning == "direct"
    assert settings.context_strategy == "truncation"
    assert settings.capture_content is False


def test_provider_is_detected_from_the_keys_or_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="No provider configured") as missing:
        AgentSettings().provider_name()
    # The message is what a failed run shows: both ways out, spelled out.
    assert "uv run manage.py local_model install" in str(missing.value)
    assert "ANTHROPIC_API_KEY" in str(missing.value)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-key")
    assert AgentSettings().provider_name() == "openai"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-key")
    assert AgentSettings().provider_name() == "anthropic"
    assert AgentSettings(provider="claude").provider_name() == "anthropic"
    with pytest.raises(ConfigurationError, match="unknown provider"):
        AgentSettings(provider="watson").provider_name()


@pytest.mark.parametrize(
    ("settings", "cls"),
    [
        ({"provider": "anthropic", "anthropic_api_key": "sk-ant-12345678"}, AnthropicProvider),
        ({"provider": "openai", "openai_api_key": "sk-12345678"}, OpenAICompatProvider),
        ({"provider": "ollama", "model": "qwen2.5:1.5b"}, OllamaProvider),
    ],
)
def test_build_model_provider(settings: dict, cls: type) -> None:
    provider = build_model_provider(AgentSettings(**settings))
    assert isinstance(provider, cls)


def test_missing_key_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        build_model_provider(AgentSettings(provider="anthropic"))


def test_context_window_override_reaches_the_adapter() -> None:
    settings = AgentSettings(provider="ollama", model="qwen2.5:7b", context_window=4096)
    assert build_model_provider(settings).capabilities().context_window == 4096


def test_build_agent_composes_the_layers() -> None:
    store = InMemoryStore()
    settings = AgentSettings(provider="ollama", reasoning="self_check", max_steps=4)
    agent = build_agent(
        settings, release_id="v2.1.0", store=store, provider=ScriptedProvider([], model="big")
    )
    assert isinstance(agent, TracedAgent)
    inner = agent._inner
    assert isinstance(inner.provider, TracedProvider)
    assert isinstance(inner.provider._inner, RetryingProvider)
    assert isinstance(inner.reasoning, SelfCheckStrategy)
    assert inner.store is store
    assert inner.config.max_steps == 4
    assert inner.config.system_prompt == DEFAULT_SYSTEM_PROMPT
    # The default profile investigates: the drill-down tools beside the summary and the report.
    assert {t.name for t in inner.tools.get_tools()} == {
        "get_release_summary",
        "get_test_details",
        "get_code_changes",
        "get_metric_history",
        "get_failure_suspects",
        "get_observability_traces",
        "file_risk_report",
    }
    assert isinstance(inner.context._inner, WindowManager)
    assert agent.conversation.metadata["release_id"] == "v2.1.0"
    assert agent.conversation.metadata["prompt_profile"] == "default"
    assert "drill-downs it chooses to call" in agent.conversation.metadata["prompt_profile_reads"]


def test_small_models_get_the_compact_profile() -> None:
    provider = ScriptedProvider([], model="qwen2.5-coder:1.5b")
    agent = build_agent(AgentSettings(), provider=provider)
    assert agent.conversation.system_prompt == SMALL_MODEL_SYSTEM_PROMPT
    assert agent._inner.config.temperature == 0.0  # the small-model profile (agent/prompts.py)
    # It gets no drill-down tools: the policy's evidence carries what they would show.
    tools = {t.name for t in agent._inner.tools.get_tools()}
    assert tools == {"get_release_summary", "file_risk_report"}
    # And the run says so plainly (the run page shows it): no drill-downs, what it read.
    reads = agent.conversation.metadata["prompt_profile_reads"]
    assert reads.startswith("No drill-downs.") and "first suspect commit" in reads
    forced = build_agent(AgentSettings(prompt_profile="default"), provider=provider)
    assert forced.conversation.system_prompt == DEFAULT_SYSTEM_PROMPT


def test_unknown_names_are_configuration_errors() -> None:
    provider = ScriptedProvider([])
    with pytest.raises(ConfigurationError, match="reasoning"):
        build_agent(AgentSettings(reasoning="vibes"), provider=provider)
    with pytest.raises(ConfigurationError, match="context strategy"):
        build_agent(AgentSettings(context_strategy="forget"), provider=provider)


async def test_summarization_uses_the_model() -> None:
    provider = ScriptedProvider([reply("The user asked about v1.")])
    agent = build_agent(AgentSettings(context_strategy="summarisation"), provider=provider)
    assert agent._inner.context._inner.strategy == "summarization"
    summarise = provider_summariser(provider)
    text = await summarise([Message.user("Assess v1"), Message.assistant("Looking.")])
    assert text == "The user asked about v1."
    request = provider.requests[0]
    assert request.tools == []
    assert "Assess v1" in request.messages[0].content


async def test_release_tools_use_the_token_and_send_the_trace_context() -> None:
    provider = ScriptedProvider([])
    settings = AgentSettings(api_url="http://api.test", api_token="tok-abcdefgh")
    async with httpx.AsyncClient() as client:
        agent = build_agent(settings, provider=provider, http_client=client)
        with respx.mock(assert_all_called=True) as router:
            route = router.get("http://api.test/api/releases/v1/summary").respond(
                json={"version": "v1"}
            )
            result = await agent._inner.tools.execute(
                ToolCall(id="c1", name="get_release_summary", arguments={"release_id": "v1"})
            )
        assert result.success
        assert route.calls.last.request.headers["Authorization"] == "Bearer tok-abcdefgh"
        await agent.aclose()
    assert provider.aclosed


@pytest.mark.parametrize(
    ("model", "view"),
    [("qwen2.5-coder:1.5b", "brief"), ("big", None)],
)
async def test_the_small_profile_reads_the_summarys_brief_view(
    model: str, view: str | None
) -> None:
    agent = build_agent(
        AgentSettings(api_url="http://api.test"), provider=ScriptedProvider([], model=model)
    )
    with respx.mock(assert_all_called=True) as router:
        route = router.get(url__startswith="http://api.test/api/releases/v1/summary").respond(
            json={"version": "v1"}
        )
        await agent._inner.tools.execute(
            ToolCall(id="c1", name="get_release_summary", arguments={"release_id": "v1"})
        )
    await agent.aclose()
    assert route.calls.last.request.url.params.get("view") == view


async def test_the_small_profile_starts_from_the_summary_read_before_its_first_step() -> None:
    provider = ScriptedProvider([reply("Done.")], model="qwen2.5-coder:1.5b")
    agent = build_agent(
        AgentSettings(api_url="http://api.test"), release_id="v1", provider=provider
    )
    with respx.mock(assert_all_called=True) as router:
        router.get(url__startswith="http://api.test/api/releases/v1/summary").respond(
            json={"version": "v1", "policy": {"evidence": {"E1": "All green."}}}
        )
        events = [event async for event in agent.send_message("Assess release v1")]
    await agent.aclose()
    assert [e.kind for e in events][1:4] == ["tool_call", "tool_result", "model_request_started"]
    first = provider.requests[0].messages
    assert [m.role for m in first] == ["user", "assistant", "tool"]
    assert "All green." in first[2].content


@pytest.mark.parametrize(
    ("model", "release_id", "opening"),
    [
        ("qwen2.5-coder:1.5b", "v1", ["get_release_summary"]),
        ("qwen2.5-coder:1.5b", None, []),  # a chat with no release under assessment
        ("claude-sonnet-4-5", "v1", []),  # it reads the summary when it sees fit
    ],
)
def test_only_the_small_profile_has_the_summary_read_for_it(
    model: str, release_id: str | None, opening: list[str]
) -> None:
    agent = build_agent(
        AgentSettings(), release_id=release_id, provider=ScriptedProvider([], model=model)
    )
    calls = agent._inner.config.opening_calls
    assert [c.name for c in calls] == opening
    assert all(c.arguments == {"release_id": release_id} for c in calls)


async def test_the_release_tools_wait_as_long_as_the_settings_say(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DETECTIVE_TOOL_TIMEOUT", "0.05")
    settings = AgentSettings(api_url="http://api.test")
    assert settings.tool_timeout == 0.05

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(1)
        return httpx.Response(200, json={})

    agent = build_agent(settings, provider=ScriptedProvider([]))
    # The route is never "called": respx records a call when its answer is ready.
    with respx.mock(assert_all_called=False) as router:
        router.get("http://api.test/api/releases/v1/summary").mock(side_effect=slow)
        result = await agent._inner.tools.execute(
            ToolCall(id="c1", name="get_release_summary", arguments={"release_id": "v1"})
        )
    await agent.aclose()
    assert not result.success
    assert "within 0.05 seconds" in result.content


async def test_adapters_can_share_one_http_client() -> None:
    settings = AgentSettings(provider="openai-compatible", model="m", base_url="http://x/v1")
    async with httpx.AsyncClient() as client:
        first = build_model_provider(settings, client=client)
        second = build_model_provider(settings, client=client)
        assert first._http._client is client and second._http._client is client
        await first.aclose()
        assert not client.is_closed  # the caller's to close


def test_capture_content_reaches_the_traced_wrappers() -> None:
    provider = ScriptedProvider([])
    agent = build_agent(AgentSettings(capture_content=True), provider=provider)
    assert agent._capture is True
    assert agent._inner.provider._capture is True
    assert agent._inner.tools._capture is True
    quiet = build_agent(AgentSettings(), provider=provider)
    assert quiet._capture is False


def test_model_calls_get_deadlines_well_under_a_minute_to_the_first_byte() -> None:
    hosted = build_model_provider(AgentSettings(provider="anthropic", anthropic_api_key="k"))
    assert isinstance(hosted, AnthropicProvider)
    deadlines = hosted._http.deadlines
    assert (deadlines.connect, deadlines.first_byte, deadlines.idle, deadlines.total) == (
        10.0,
        30.0,
        30.0,
        300.0,
    )
    local = build_model_provider(AgentSettings(provider="ollama"))
    assert local._http.deadlines.first_byte == 120.0  # type: ignore[attr-defined]


def test_the_deadlines_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DETECTIVE_MODEL_FIRST_BYTE_TIMEOUT", "5")
    monkeypatch.setenv("DETECTIVE_MODEL_IDLE_TIMEOUT", "7")
    monkeypatch.setenv("DETECTIVE_MODEL_CALL_TIMEOUT", "60")
    settings = AgentSettings(provider="local", base_url="http://127.0.0.1:1/v1", model="m")
    deadlines = build_model_provider(settings)._http.deadlines  # type: ignore[attr-defined]
    assert (deadlines.first_byte, deadlines.idle, deadlines.total) == (5.0, 7.0, 60.0)
    monkeypatch.setenv("DETECTIVE_MODEL_FIRST_BYTE_TIMEOUT", "0")
    with pytest.raises(ValueError):
        AgentSettings()


def test_an_empty_variable_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    # The benchmark's sites blank the variables they control; "" must not be a bad boolean.
    for name in ("DETECTIVE_CAPTURE_CONTENT", "DETECTIVE_PROVIDER", "DETECTIVE_MAX_STEPS"):
        monkeypatch.setenv(name, "")
    settings = AgentSettings()
    assert (settings.capture_content, settings.provider) == (False, None)
