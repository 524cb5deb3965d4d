"""`manage.py assess <version>`: assess a release in the foreground, without the web server.

The same pipeline as Reassess (a run in the database, the agent through `assessments.runner`, the
tools calling the release API), except that the API is served in-process: the tools' HTTP
client is routed straight into the site's WSGI handler (`assessments/runner/in_process.py`).
The timeline is printed as it happens, then the report. Exit status 0 only when a verdict was
stored (the model's report, or the one kept for a person when it filed none).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console
from rich.markup import escape

from assessments import assessing, runner, services
from assessments.runner.in_process import in_process_api
from releases import selectors
from releases.models import AgentEvent, Conversation, RiskReport, RunStatus
from risk.judge import warm_up_in_background

SEVERITY_STYLES = {"high": "bold red", "medium": "bold yellow", "low": "bold green"}


class Command(BaseCommand):
    help = "Assess the risk of a release now, in the foreground, and print what the agent does."
    # Django's system checks import every URL module first: 0.6 s of each assessment, which
    # a pipeline pays per release. `up`, `migrate` and `check` run them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("version", help="The release to assess, e.g. v2.1.0.")
        parser.add_argument("--service", help="The release's service (default: the default one).")
        parser.add_argument("--provider", help="LLM provider (default: DETECTIVE_PROVIDER).")
        parser.add_argument("--model", help="Model name (default: DETECTIVE_MODEL).")
        parser.add_argument(
            "--base-url", help="The provider API's base URL (default: DETECTIVE_BASE_URL)."
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="Assess even when the data has not changed since the verdict that stands "
            "(without it, that verdict, a person's decision included, is kept and printed).",
        )
        parser.add_argument(
            "--api-url",
            help="Call this release API instead of the site's own, served in-process.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # The raw stream: Django's wrapper would end every text delta with a newline.
        console = Console(file=self.stdout._out, highlight=False, soft_wrap=True)
        version: str = options["version"]
        release = selectors.find_release(version, options["service"])
        if release is None:
            raise CommandError(f"Release {version!r} not found.")
        problem = runner.configuration_problem(
            provider=options["provider"], model=options["model"], base_url=options["base_url"]
        )
        if problem:
            raise CommandError(problem)
        # The in-process API judges the release's metrics when the model asks for the summary:
        # numpy's import (0.2-0.5 s) then overlaps the model's first call.
        warm_up_in_background()
        # Run here, not by a worker: one that is running (`up`) would otherwise race for it.
        outcome = assessing.assess_unless_unchanged(
            release,
            None,
            force=options["force"],
            asked_by="manage.py assess" + (" --force" if options["force"] else ""),
            provider=options["provider"],
            model=options["model"],
        )
        run = outcome.run
        if outcome.kept:
            console.print(escape(outcome.message))
        elif run.status == RunStatus.RUNNING:
            raise CommandError(
                f"Release {version} is already being assessed (run {run.pk}); wait for it or "
                "cancel it first."
            )
        status = run.status
        if not outcome.kept:
            status = self._run(console, version, run, options)
        report = RiskReport.objects.filter(conversation=run).order_by("-filed_at").first()
        run.refresh_from_db()
        if report is None:
            detail = f": {run.error}" if run.error else ""
            raise CommandError(f"No report was filed (the run {status}){detail}")
        verdict = selectors.release_verdict(release)
        severity = verdict.severity or report.severity
        style = SEVERITY_STYLES.get(severity, "bold")
        console.print()
        console.print(f"[{style}]{severity.upper()} risk[/] · {escape(release.version)}")
        if run.headline:
            console.print(escape(run.headline))
        if verdict.state == "needs_person":
            console.print(
                f"Waits for a person: the model said {report.severity}, the policy "
                f"{report.policy_severity or 'nothing'}."
            )
            for reason in report.review_reasons or []:
                console.print(f"  ! {escape(str(reason))}")
        if report.summary:
            console.print(escape(report.summary))
        for finding in report.findings:
            console.print(f"  • {escape(finding)}")
        tokens = (run.input_tokens or 0) + (run.output_tokens or 0)
        cost = f", about ${run.estimated_cost:.4f}" if run.estimated_cost is not None else ""
        console.print(f"[dim]{tokens} tokens{cost}; run {run.pk}[/]")

    def _run(self, console: Console, version: str, run: Conversation, options: Any) -> str:
        console.print(f"[bold]Assessing {escape(version)}[/] (run {run.pk})")
        printer = _Printer(console)
        if options["api_url"]:
            client, api_url = None, options["api_url"]
        else:
            client, api_url = in_process_api()
        with _signals_cancel_the_run():
            status = runner.run_assessment(
                str(run.pk),
                services.current_traceparent(),
                api_url=api_url,
                http_client=client,
                base_url=options["base_url"],
                on_event=printer,
            )
        printer.end_text()
        return status


@contextlib.contextmanager
def _signals_cancel_the_run() -> Iterator[None]:
    """SIGTERM (a CI job's timeout) or SIGINT (Ctrl+C) cancels the run within a fraction of a
    second, as under `up`: the runner sees the signal (`runner.stop_runs_on_signals`) and
    ends the run as cancelled, and the command then exits non-zero saying so. Without this
    SIGTERM killed the process and left its run "running" until a sweep found it."""
    runner.stop_runs_on_signals()
    # Ctrl+C must not raise KeyboardInterrupt through the run: the runner ends it instead.
    previous = signal.signal(signal.SIGINT, _noted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _noted(signum: int, frame: FrameType | None) -> None:
    """The runner's own handler has seen the signal; nothing more to do here."""


class _Printer:
    """Prints each saved event as the run goes (text deltas inline)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.in_text = False

    def end_text(self) -> None:
        if self.in_text:
            self.console.print()
            self.in_text = False

    def __call__(self, event: AgentEvent) -> None:
        kind, payload = event.kind, event.payload
        out = self.console
        if kind == "text_delta":
            out.print(escape(str(payload.get("text", ""))), end="")
            self.in_text = True
            return
        if kind in {"model_responded", "usage", "model_request_started"}:
            if kind == "usage":
                self.end_text()
                usage = payload.get("usage") or {}
                out.print(
                    f"[dim]  {usage.get('input_tokens', 0)} tokens in, "
                    f"{usage.get('output_tokens', 0)} out[/]"
                )
            return
        self.end_text()
        if kind == "run_started":
            provider, model = payload.get("provider", ""), payload.get("model", "")
            out.print(f"[dim]{escape(provider)} · {escape(model)}[/]")
        elif kind == "tool_call":
            call = payload.get("tool_call") or {}
            out.print(
                f"[cyan]→ {escape(str(call.get('name')))}[/] {escape(str(call.get('arguments')))}"
            )
        elif kind == "tool_result":
            result = payload.get("result") or {}
            mark = "[green]✓[/]" if result.get("success") else "[red]✗[/]"
            content = str(result.get("content", ""))
            out.print(f"  {mark} {escape(content[:300])}{'…' if len(content) > 300 else ''}")
        elif kind == "retry_scheduled":
            out.print(
                f"[yellow]↻ retrying in {payload.get('delay_s', 0):.1f} s: "
                f"{escape(str(payload.get('reason', '')))}[/]"
            )
        elif kind == "context_trimmed":
            out.print("[yellow]✂ context trimmed[/]")
        elif kind == "report_filed":
            out.print(f"[bold]Report filed:[/] {escape(str(payload.get('severity')))}")
        elif kind == "run_failed":
            out.print(f"[red]Failed: {escape(str(payload.get('message', '')))}[/]")
        elif kind == "run_cancelled":
            out.print("[yellow]Cancelled[/]")
        elif kind == "run_finished":
            out.print(f"[dim]Finished ({escape(str(payload.get('reason')))})[/]")
