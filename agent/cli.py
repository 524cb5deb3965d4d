"""The command line: `uv run python -m agent`.

A REPL over one agent. Free text is sent as a message; commands:

    /assess <release>   assess a release ("Assess the risk of release <release>")
    /new                start a new conversation
    /history            show this conversation's messages
    /list               list saved conversations
    /load <id>          continue a saved conversation
    /help               this list
    /quit               leave (also /exit, Ctrl+D)

The model's text streams as it arrives, tool calls and their results show as they
happen, and a filed report is shown in full. Expected failures (no provider configured,
provider unreachable, bad key, unknown model, release not found) are one line, never a
traceback. Ctrl+C during a run cancels it (the conversation keeps what was done); a
second Ctrl+C stops waiting at once.

Conversations are saved under `<DETECTIVE_DATA_DIR>/conversations` (one JSON file each,
with a `.events.jsonl` session log beside it), traces under `<DETECTIVE_DATA_DIR>/traces`
and the structured logs (JSON lines) in `<DETECTIVE_DATA_DIR>/logs/agent.log`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agent.cancel import CancelToken
from agent.errors import AgentError
from agent.events import (
    AgentEvent,
    ContextTrimmed,
    ReportFiled,
    RetryScheduled,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallRequested,
    ToolResultReceived,
)
from agent.messages import Conversation, Message
from agent.store import ConversationStore

PROMPT = "you> "
SEVERITY_STYLES = {"high": "bold red", "medium": "bold yellow", "low": "bold green"}
HELP = """\
/assess <release>   assess a release ("Assess the risk of release <release>")
/new                start a new conversation
/history            show this conversation's messages
/list               list saved conversations
/load <id>          continue a saved conversation
/help               this list
/quit               leave (also /exit, Ctrl+D)
Anything else is sent to the agent as a message. Ctrl+C cancels a run."""

ReadLine = Callable[[str], str]


class ChatAgent(Protocol):
    """What the REPL needs of an agent (an `Agent`, or the `TracedAgent` around one)."""

    conversation: Conversation

    def send_message(
        self, content: str, cancel: CancelToken | None = None
    ) -> AsyncIterator[AgentEvent]: ...

    def get_history(self, limit: int | None = None) -> list[Message]: ...

    def new_conversation(self) -> Conversation: ...

    def resume(self, conversation: Conversation | str) -> Conversation: ...


class Repl:
    """The loop of the command line; input and output are injected for tests."""

    def __init__(
        self,
        agent: ChatAgent,
        store: ConversationStore,
        *,
        console: Console | None = None,
        read_line: ReadLine = input,
        handle_signals: bool = True,
    ) -> None:
        self.agent = agent
        self.store = store
        self.console = console or Console(highlight=False)
        self.read_line = read_line
        self.handle_signals = handle_signals
        self._streaming = False

    async def run(self) -> int:
        self.console.print(
            "Detective: type a message, [bold]/assess <release>[/], or [bold]/help[/]."
        )
        self._show_conversation_id()
        while True:
            try:
                line = await asyncio.to_thread(self.read_line, PROMPT)
            except (EOFError, KeyboardInterrupt):
                self.console.print()
                return 0
            if not await self.handle(line.strip()):
                return 0

    async def handle(self, line: str) -> bool:
        """Run one line of input; False when it asked to quit."""
        if not line:
            return True
        if not line.startswith("/"):
            await self.send(line)
            return True
        command, _, argument = line.partition(" ")
        argument = argument.strip()
        match command.lower():
            case "/quit" | "/exit":
                return False
            case "/help":
                self.console.print(HELP, markup=False)
            case "/new":
                self.agent.new_conversation()
                self._show_conversation_id()
            case "/history":
                self.show_history()
            case "/list":
                self.show_list()
            case "/load":
                self.load(argument)
            case "/assess":
                if not argument:
                    self.error("usage: /assess <release id>")
                else:
                    self.agent.conversation.metadata["release_id"] = argument
                    await self.send(f"Assess the risk of release {argument}")
            case _:
                self.error(f"unknown command {command}; /help lists them")
        return True

    # -- commands -------------------------------------------------------------------

    async def send(self, content: str) -> None:
        token = CancelToken()
        task = asyncio.ensure_future(self._relay(content, token))
        with self._interrupts(token, task):
            try:
                await task
            except asyncio.CancelledError:
                self._end_line()
                self.console.print("[yellow]Stopped.[/]")

    def show_history(self) -> None:
        messages = self.agent.get_history()
        if not messages:
            self.console.print("[dim](no messages yet)[/]")
        for message in messages:
            self.console.print(_history_line(message))

    def show_list(self) -> None:
        summaries = self.store.list()
        if not summaries:
            self.console.print("[dim](no saved conversations)[/]")
            return
        table = Table(show_edge=False, header_style="bold")
        # Ids are what /load takes: never cut, whatever the terminal's width.
        id_width = max(len(summary.id) for summary in summaries) + 2
        table.add_column("id", no_wrap=True, min_width=id_width)
        table.add_column("updated", no_wrap=True)
        table.add_column("messages", justify="right")
        table.add_column("first message", overflow="ellipsis", no_wrap=True)
        for summary in summaries:
            marker = " *" if summary.id == self.agent.conversation.id else ""
            table.add_row(
                summary.id + marker,
                summary.updated_at.strftime("%Y-%m-%d %H:%M"),
                str(summary.message_count),
                summary.title,
            )
        self.console.print(table)

    def load(self, conversation_id: str) -> None:
        if not conversation_id:
            self.error("usage: /load <conversation id> (see /list)")
            return
        try:
            conversation = self.agent.resume(conversation_id)
        except AgentError as exc:
            self.error(str(exc))
            return
        self.console.print(f"Loaded {conversation.id} ({len(conversation.messages)} messages).")

    # -- a run ---------------------------------------------------------------------

    async def _relay(self, content: str, token: CancelToken) -> None:
        async for event in self.agent.send_message(content, token):
            self.show(event)

    def show(self, event: AgentEvent) -> None:
        """Print one event; text deltas as they come, everything else on its own line."""
        if isinstance(event, TextDelta):
            if not self._streaming:
                self.console.print("[bold cyan]detective>[/] ", end="")
                self._streaming = True
            self.console.print(event.text, end="", markup=False)
            return
        if isinstance(event, RunStarted):
            return
        self._end_line()
        if isinstance(event, ToolCallRequested):
            arguments = json.dumps(event.tool_call.arguments, ensure_ascii=False)
            self.console.print(
                Text.assemble(("  → ", "dim"), (event.tool_call.name, "bold"), f"({arguments})")
            )
        elif isinstance(event, ToolResultReceived):
            result = event.result
            first_line = (result.content.strip().splitlines() or [""])[0]
            if result.success:
                summary = f"  ✓ {result.name} ({result.duration_ms:.0f} ms)"
                self.console.print(Text(summary, style="green"))
            else:
                self.console.print(Text(f"  ✗ {result.name}: {_clip(first_line)}", style="red"))
        elif isinstance(event, RetryScheduled):
            note = " (partial output discarded)" if event.partial_discarded else ""
            self.console.print(
                Text(
                    f"  … {event.reason}; retry {event.attempt + 1}/{event.max_attempts} "
                    f"in {event.delay_s:.1f}s{note}",
                    style="yellow",
                )
            )
        elif isinstance(event, ContextTrimmed):
            self.console.print(
                Text(
                    f"  … context trimmed ({event.strategy}): {event.messages_before} → "
                    f"{event.messages_after} messages, {event.utilisation:.0%} of the window",
                    style="dim",
                )
            )
        elif isinstance(event, ReportFiled):
            self.console.print(_report_panel(event))
        elif isinstance(event, RunFinished):
            usage = event.usage
            self.console.print(
                Text(
                    f"[{event.reason.replace('_', ' ')} · {event.steps} step(s) · "
                    f"{usage.input_tokens} in / {usage.output_tokens} out tokens]",
                    style="dim",
                )
            )
        elif isinstance(event, RunFailed):
            self.error(f"{_friendly(event.error_type)}{event.message}")
        elif isinstance(event, RunCancelled):
            self.console.print(Text(f"Cancelled ({event.reason}).", style="yellow"))

    # -- helpers -------------------------------------------------------------------

    def error(self, message: str) -> None:
        self._end_line()
        self.console.print(Text(f"error: {_clip(message, 300)}", style="bold red"), soft_wrap=True)

    def _end_line(self) -> None:
        if self._streaming:
            self.console.print()
            self._streaming = False

    def _show_conversation_id(self) -> None:
        self.console.print(f"[dim]conversation {self.agent.conversation.id}[/]")

    @contextlib.contextmanager
    def _interrupts(self, token: CancelToken, task: asyncio.Future[None]) -> Any:
        """Ctrl+C: first cancel the run cooperatively, then stop waiting for it."""
        loop = asyncio.get_running_loop()
        if not self.handle_signals:
            yield
            return

        def interrupted() -> None:
            if token.is_set:
                task.cancel()
            else:
                token.set("interrupted")

        try:
            loop.add_signal_handler(signal.SIGINT, interrupted)
        except (NotImplementedError, RuntimeError, ValueError):
            yield  # no signal handlers here (not the main thread, or Windows)
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)


_FRIENDLY = {
    "AuthenticationError": "the provider refused the API key: ",
    "NotFoundError": "unknown model or endpoint: ",
    "NetworkError": "the provider could not be reached: ",
    "ProviderTimeoutError": "the provider did not answer in time: ",
    "RateLimitError": "rate limited: ",
    "ConfigurationError": "configuration: ",
}


def _friendly(error_type: str) -> str:
    return _FRIENDLY.get(error_type, f"{error_type}: ")


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _history_line(message: Message) -> Text:
    styles = {"user": "bold", "assistant": "cyan", "tool": "dim", "system": "magenta"}
    line = Text(f"{message.role:>9}: ", style=styles.get(message.role, ""))
    if message.content:
        line.append(_clip(message.content, 400))
    for call in message.tool_calls:
        line.append(f" → {call.name}({json.dumps(call.arguments, ensure_ascii=False)})")
    return line


def _report_panel(event: ReportFiled) -> Panel:
    body = Text()
    body.append("severity: ")
    body.append(event.severity.upper(), style=SEVERITY_STYLES.get(event.severity, "bold"))
    if event.summary:
        body.append(f"\n{event.summary}")
    for finding in event.findings:
        body.append(f"\n • {finding}")
    title = f"risk report for {event.release_id}"
    if event.report_id:
        title += f" ({event.report_id})"
    return Panel(body, title=title, expand=False)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m agent",
        description="Detective: assess a release's risk with an LLM agent.",
        epilog="Settings come from DETECTIVE_* environment variables; see agent/config.py.",
    )
    parser.add_argument("--provider", help="anthropic, openai, openrouter, ollama...")
    parser.add_argument("--model", help="the model name")
    parser.add_argument("--base-url", help="the provider API's base URL")
    parser.add_argument("--reasoning", help="direct, self_check or plan")
    parser.add_argument("--data-dir", help="where conversations and traces are saved")
    parser.add_argument("--api-url", help="the release API's base URL")
    parser.add_argument("--load", metavar="ID", help="continue a saved conversation")
    return parser.parse_args(argv)


async def run_cli(
    argv: Sequence[str] | None = None,
    *,
    console: Console | None = None,
    read_line: ReadLine = input,
    handle_signals: bool = True,
    **build_options: Any,
) -> int:
    """Build the agent from the settings and run the REPL; 0 on a normal exit, 2 when the
    configuration is unusable. `build_options` go to `build_agent` (tests)."""
    # Imported here: `--help` should not wait for the providers and OpenTelemetry.
    from agent.config import AgentSettings, build_agent, build_model_provider
    from agent.store import JsonFileStore
    from agent.telemetry.logging import configure_logging
    from agent.telemetry.setup import configure_telemetry, shutdown_telemetry

    console = console or Console(highlight=False)
    args = parse_args(argv)
    overrides = {
        key: value for key, value in vars(args).items() if value is not None and key not in {"load"}
    }
    try:
        settings = AgentSettings(**overrides)
        if "provider" not in build_options:
            adapter = build_model_provider(settings)
            build_options["provider"] = adapter
            await _check_health(adapter)
        store = JsonFileStore(settings.conversations_dir)
        log_file = _open_log(settings.data_dir)
    except (AgentError, ValueError, OSError) as exc:
        console.print(Text(f"error: {_clip(str(exc), 300)}", style="bold red"), soft_wrap=True)
        return 2
    # Structured logs go to a file: the screen is for the conversation.
    log_handler = configure_logging(stream=log_file)
    try:
        configure_telemetry(settings.telemetry_config())
        agent = build_agent(settings, store=store, **build_options)
        if args.load:
            agent.resume(args.load)
    except (AgentError, ValueError, OSError) as exc:
        _close_log(log_handler, log_file)
        console.print(Text(f"error: {_clip(str(exc), 300)}", style="bold red"), soft_wrap=True)
        return 2
    console.print(
        f"[dim]{agent.provider.name} · {agent.provider.model} · "
        f"reasoning {agent.reasoning.name} · data in {settings.data_dir}[/]"
    )
    repl = Repl(agent, store, console=console, read_line=read_line, handle_signals=handle_signals)
    try:
        return await repl.run()
    finally:
        await agent.aclose()
        shutdown_telemetry()
        _close_log(log_handler, log_file)


def _open_log(data_dir: Path) -> TextIO:
    logs = Path(data_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    return (logs / "agent.log").open("a", encoding="utf-8")


def _close_log(handler: logging.Handler, log_file: TextIO) -> None:
    logging.getLogger("agent").removeHandler(handler)
    handler.close()
    log_file.close()


async def _check_health(adapter: Any) -> None:
    """Ask a local server (Ollama) whether it runs and has the model, before the first
    message rather than at it; hosted APIs have no such check."""
    health_check = getattr(adapter, "health_check", None)
    if health_check is None:
        return
    try:
        await health_check()
    except AgentError:
        await adapter.aclose()
        raise


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return asyncio.run(run_cli(argv))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
