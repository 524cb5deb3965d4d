from __future__ import annotations

import asyncio
import io
from collections.abc import Iterable, Sequence

import pytest
from rich.console import Console

from agent.cancel import CancelToken
from agent.cli import Repl, main, parse_args, run_cli
from agent.errors import NetworkError
from agent.events import RetryScheduled
from agent.loop import Agent
from agent.messages import ToolResult
from agent.store import InMemoryStore
from agent.testing.fakes import FakeTools, PassThroughContext, ScriptedProvider, call, reply


@pytest.fixture(autouse=True)
def local_telemetry(monkeypatch: pytest.MonkeyPatch) -> list:
    """run_cli configures telemetry; OpenTelemetry's global providers can be set once per
    process, so never from a test."""
    from agent.telemetry import setup

    real_configure = setup.configure_telemetry
    configured: list = []

    def configure_locally(config: setup.TelemetryConfig) -> setup.Telemetry:
        configured.append(config)
        return real_configure(config, set_global=False)

    monkeypatch.setattr(setup, "configure_telemetry", configure_locally)
    return configured


def lines(*inputs: str):
    pending = list(inputs)

    def read_line(prompt: str) -> str:
        if not pending:
            raise EOFError
        return pending.pop(0)

    return read_line


def release_tools() -> FakeTools:
    def get_release_summary(release_id: str) -> dict:
        if release_id == "v404":
            raise LookupError("Release 'v404' does not exist")
        return {"tests": {"passed": 10, "failed": 0}, "deployment_metrics": {"error_rate": 0.01}}

    def file_risk_report(release_id: str, severity: str, findings: list[str]) -> dict:
        return {
            "report_id": "rep_9",
            "release_id": release_id,
            "severity": severity,
            "findings": findings,
            "summary": "Clean release.",
        }

    return FakeTools(
        {"get_release_summary": get_release_summary, "file_risk_report": file_risk_report},
        terminal=["file_risk_report"],
    )


def make_repl(
    turns: Sequence, inputs: Iterable[str] = ()
) -> tuple[Repl, Agent, InMemoryStore, io.StringIO]:
    store = InMemoryStore()
    agent = Agent(
        ScriptedProvider(turns), release_tools(), context=PassThroughContext(), store=store
    )
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None, highlight=False)
    repl = Repl(agent, store, console=console, read_line=lines(*inputs), handle_signals=False)
    return repl, agent, store, out


ASSESSMENT = [
    reply("Let me look.", call("get_release_summary", "c1", release_id="v1")),
    reply(
        "All green.",
        call(
            "file_risk_report",
            "c2",
            release_id="v1",
            severity="low",
            findings=["0 failed tests", "error_rate 0.01"],
        ),
    ),
]


async def test_assess_streams_text_tools_and_the_report() -> None:
    repl, agent, _, out = make_repl(ASSESSMENT, ["/assess v1", "/quit"])
    assert await repl.run() == 0
    text = out.getvalue()
    assert "detective> Let me look." in text
    assert '→ get_release_summary({"release_id": "v1"})' in text
    assert "✓ get_release_summary" in text
    assert "risk report for v1 (rep_9)" in text
    assert "severity: LOW" in text
    assert "• error_rate 0.01" in text
    assert "Clean release." in text
    assert "[report filed · 2 step(s)" in text
    assert agent.conversation.messages[0].content == "Assess the risk of release v1"
    assert agent.conversation.metadata["release_id"] == "v1"


async def test_free_text_is_sent_and_eof_quits() -> None:
    repl, agent, _, out = make_repl([reply("Hello.")], ["", "hi there"])
    assert await repl.run() == 0
    assert agent.conversation.messages[0].content == "hi there"
    assert "detective> Hello." in out.getvalue()
    assert "[answered" in out.getvalue()


async def test_history_new_list_and_load() -> None:
    repl, agent, _, out = make_repl(ASSESSMENT)
    await repl.handle("/history")
    assert "(no messages yet)" in out.getvalue()
    await repl.handle("/assess v1")
    first_id = agent.conversation.id

    await repl.handle("/history")
    assert "user: Assess the risk of release v1" in out.getvalue()
    assert "tool: " in out.getvalue()

    await repl.handle("/new")
    assert agent.conversation.id != first_id
    assert f"conversation {agent.conversation.id}" in out.getvalue()

    await repl.handle("/list")
    assert f"{first_id}" in out.getvalue()
    assert "Assess the risk of release v1" in out.getvalue()

    await repl.handle(f"/load {first_id}")
    assert agent.conversation.id == first_id
    assert f"Loaded {first_id} (5 messages)" in out.getvalue()


async def test_command_errors_are_one_line() -> None:
    repl, _, _, out = make_repl([])
    for command in ("/load", "/load conv_nope", "/assess", "/frobnicate"):
        assert await repl.handle(command)
    text = out.getvalue()
    assert "usage: /load" in text
    assert "error: No conversation 'conv_nope'" in text
    assert "usage: /assess" in text
    assert "unknown command /frobnicate" in text
    assert "Traceback" not in text


async def test_list_when_empty_and_help() -> None:
    repl, _, _, out = make_repl([])
    await repl.handle("/list")
    await repl.handle("/help")
    assert "(no saved conversations)" in out.getvalue()
    assert "/assess <release>" in out.getvalue()
    assert not await repl.handle("/exit")


async def test_provider_failure_is_one_friendly_line() -> None:
    error = NetworkError("could not connect to http://127.0.0.1:11434", provider="ollama")
    repl, _, _, out = make_repl([error])
    await repl.handle("hello")
    text = out.getvalue()
    assert "error: the provider could not be reached: could not connect" in text
    assert "Traceback" not in text


async def test_release_not_found_shows_the_failed_tool_and_the_answer() -> None:
    turns = [
        reply("", call("get_release_summary", "c1", release_id="v404")),
        reply("Release v404 does not exist; no report filed."),
    ]
    repl, _, _, out = make_repl(turns)
    await repl.handle("/assess v404")
    text = out.getvalue()
    assert "✗ get_release_summary: get_release_summary failed: Release 'v404'" in text
    assert "no report filed" in text


def test_other_events_are_shown() -> None:
    repl, _, _, out = make_repl([])
    repl.show(
        RetryScheduled(
            attempt=1,
            max_attempts=3,
            delay_s=2.0,
            reason="rate limited",
            error_type="RateLimitError",
            partial_discarded=True,
        )
    )
    from agent.events import ContextTrimmed, RunCancelled, ToolResultReceived

    repl.show(
        ContextTrimmed(
            strategy="truncation",
            messages_before=10,
            messages_after=4,
            tokens_before=900,
            tokens_after=300,
            budget=400,
            utilisation=0.3,
        )
    )
    repl.show(RunCancelled(reason="interrupted"))
    long = ToolResult(tool_call_id="x", name="t", content="y" * 500, success=False)
    repl.show(ToolResultReceived(step=1, result=long))
    text = out.getvalue()
    assert "retry 2/3 in 2.0s (partial output discarded)" in text
    assert "context trimmed (truncation): 10 → 4 messages, 30% of the window" in text
    assert "Cancelled (interrupted)." in text
    assert "…" in text


async def test_cancelling_the_run_task_stops_cleanly() -> None:
    gate = asyncio.Event()
    provider = ScriptedProvider([reply("never arrives")], gate=gate)
    store = InMemoryStore()
    agent = Agent(provider, release_tools(), context=PassThroughContext(), store=store)
    out = io.StringIO()
    repl = Repl(agent, store, console=Console(file=out), handle_signals=False)

    async def relay(content: str, token: CancelToken) -> None:
        raise asyncio.CancelledError

    repl._relay = relay  # type: ignore[method-assign]
    await repl.send("hello")
    assert "Stopped." in out.getvalue()


async def test_run_cli_reports_configuration_errors_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    for name in ("DETECTIVE_PROVIDER", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()
    code = await run_cli(
        ["--data-dir", str(tmp_path)], console=Console(file=out), read_line=lines()
    )
    assert code == 2
    assert out.getvalue().startswith("error: No provider configured")
    assert len(out.getvalue().strip().splitlines()) == 1

    out = io.StringIO()
    code = await run_cli(
        ["--provider", "watson", "--data-dir", str(tmp_path)],
        console=Console(file=out),
        read_line=lines(),
    )
    assert code == 2
    assert "unknown provider 'watson'" in out.getvalue()


async def test_run_cli_runs_the_repl_on_a_built_agent(tmp_path, local_telemetry: list) -> None:
    from agent.telemetry import setup

    out = io.StringIO()
    provider = ScriptedProvider([reply("Hello from the scripted model.")])
    code = await run_cli(
        ["--data-dir", str(tmp_path), "--reasoning", "self_check"],
        console=Console(file=out, width=120),
        read_line=lines("hi", "/quit"),
        handle_signals=False,
        provider=provider,
    )
    assert code == 0
    text = out.getvalue()
    assert "scripted · scripted-model · reasoning self_check" in text
    assert "Hello from the scripted model." in text
    saved = list((tmp_path / "conversations").glob("*.json"))
    assert len(saved) == 1
    assert (tmp_path / "conversations" / f"{saved[0].stem}.events.jsonl").exists()
    assert provider.aclosed
    assert local_telemetry[0].traces_dir == tmp_path / "traces"
    assert (tmp_path / "logs" / "agent.log").exists()
    assert setup.active_telemetry() is None  # shut down on exit


def test_parse_args_and_main_help(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse_args(["--provider", "ollama", "--model", "qwen2.5:1.5b"])
    assert (args.provider, args.model) == ("ollama", "qwen2.5:1.5b")
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "/assess" not in capsys.readouterr().err


async def test_ctrl_c_cancels_the_run_then_stops_waiting() -> None:
    import signal

    repl, _, _, _ = make_repl([])
    repl.handle_signals = True
    token = CancelToken()
    task = asyncio.ensure_future(asyncio.sleep(10))
    with repl._interrupts(token, task):
        signal.raise_signal(signal.SIGINT)
        await asyncio.sleep(0.01)
        assert token.is_set
        assert token.reason == "interrupted"
        assert not task.cancelled()
        signal.raise_signal(signal.SIGINT)
        await asyncio.sleep(0.01)
        assert task.cancelled()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


async def test_run_cli_loads_a_saved_conversation(tmp_path) -> None:
    from agent.messages import Conversation, Message
    from agent.store import JsonFileStore

    store = JsonFileStore(tmp_path / "conversations")
    saved = Conversation()
    store.create(saved)
    store.append_message(saved.id, Message.user("earlier"))
    out = io.StringIO()
    code = await run_cli(
        ["--data-dir", str(tmp_path), "--load", saved.id],
        console=Console(file=out, width=200),
        read_line=lines("/history"),
        handle_signals=False,
        provider=ScriptedProvider([]),
    )
    assert code == 0
    assert "user: earlier" in out.getvalue()

    out = io.StringIO()
    code = await run_cli(
        ["--data-dir", str(tmp_path), "--load", "conv_missing"],
        console=Console(file=out, width=200),
        read_line=lines(),
        provider=ScriptedProvider([]),
    )
    assert code == 2
    assert "error: No conversation 'conv_missing'" in out.getvalue()


def test_main_turns_a_keyboard_interrupt_into_exit_code_130(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def interrupted(coroutine: object) -> int:
        coroutine.close()  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    monkeypatch.setattr(asyncio, "run", interrupted)
    assert main([]) == 130


def test_python_dash_m_agent_runs_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    import runpy
    import sys

    monkeypatch.setattr(sys, "argv", ["python -m agent", "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("agent", run_name="__main__")
    assert exit_info.value.code == 0


async def test_run_cli_says_plainly_when_ollama_is_not_running(tmp_path) -> None:
    import httpx
    import respx

    out = io.StringIO()
    with respx.mock() as router:
        router.get("http://ollama.test/api/tags").mock(side_effect=httpx.ConnectError("refused"))
        code = await run_cli(
            [
                "--provider",
                "ollama",
                "--base-url",
                "http://ollama.test",
                "--data-dir",
                str(tmp_path),
            ],
            console=Console(file=out, width=200),
            read_line=lines(),
        )
    assert code == 2
    assert out.getvalue().strip() == "error: Ollama is not running at http://ollama.test"


async def test_run_cli_says_plainly_when_the_model_is_not_pulled(tmp_path) -> None:
    import respx

    out = io.StringIO()
    with respx.mock() as router:
        router.get("http://ollama.test/api/tags").respond(json={"models": [{"name": "llama3:8b"}]})
        code = await run_cli(
            [
                "--provider",
                "ollama",
                "--model",
                "qwen2.5:1.5b",
                "--base-url",
                "http://ollama.test",
                "--data-dir",
                str(tmp_path),
            ],
            console=Console(file=out, width=200),
            read_line=lines(),
        )
    assert code == 2
    assert "model qwen2.5:1.5b is not pulled; run `ollama pull qwen2.5:1.5b`" in out.getvalue()


async def test_run_cli_starts_when_ollama_has_the_model(tmp_path) -> None:
    import respx

    out = io.StringIO()
    with respx.mock() as router:
        router.get("http://ollama.test/api/tags").respond(
            json={"models": [{"name": "qwen2.5:1.5b"}]}
        )
        router.post("http://ollama.test/api/show").respond(
            json={"model_info": {"qwen2.context_length": 32768}}
        )
        code = await run_cli(
            [
                "--provider",
                "ollama",
                "--model",
                "qwen2.5:1.5b",
                "--base-url",
                "http://ollama.test",
                "--data-dir",
                str(tmp_path),
            ],
            console=Console(file=out, width=200),
            read_line=lines("/quit"),
            handle_signals=False,
        )
    assert code == 0
    assert "ollama · qwen2.5:1.5b" in out.getvalue()
