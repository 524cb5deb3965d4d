"""`manage.py run_evals`: run the scenario suite against the configured provider.

Every scenario runs `--trials` times, `--concurrency` trials at a time, each a real agent run
whose tools read the scenario through the site's API (served in-process). The run is stored
(EvalRun, EvalResults, the trials' conversations and traces) and summarised on the terminal.

Exit status: 0 when the run finished (and, with `--compare`, the verdict is pass or
marginal); 1 when the comparison's verdict is fail or the run failed; 2 for a usage problem
(no provider, unknown scenarios, nothing to compare with).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from assessments import runner as release_runner
from assessments.runner.process import freeze_startup_heap, instrument_web
from evals import selectors, services
from evals.compare import Comparison
from evals.models import EvalRun
from evals.reports import own_words_line, write_reports
from evals.runner.trials import (
    DEFAULT_TOOL_TIMEOUT_S,
    DEFAULT_TRIAL_TIMEOUT_S,
    EvalOptions,
    TrialOutcome,
    run_suite,
)
from evals.scenario import ScenarioError, load_suite
from evals.stats import RunSummary
from local_model.paths import LocalModelPaths
from local_model.serve import running_server
from local_model.spec import MODEL
from releases.models import RunStatus

USAGE_ERROR = 2
VERDICT_STYLES = {"pass": "bold green", "marginal": "bold yellow", "fail": "bold red"}
STATUS_STYLES = {"passed": "green", "failed": "red", "flaky": "yellow", "errored": "magenta"}


class Command(BaseCommand):
    help = "Run the evaluation suite: every scenario K times, stored, summarised, compared."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--trials", type=int, default=3, help="Trials per scenario (3).")
        parser.add_argument(
            "--scenarios",
            metavar="PATTERN",
            help="Comma-separated globs on scenario ids (high_*), tag:NAME, or critical.",
        )
        parser.add_argument("--concurrency", type=int, default=4, help="Trials run at once (4).")
        parser.add_argument(
            "--baseline", action="store_true", help="Mark this run as the baseline."
        )
        parser.add_argument(
            "--compare",
            nargs="?",
            const=selectors.BASELINE,
            metavar="RUN_ID",
            help="Compare with this run (default: the baseline); exit 1 if the verdict is fail.",
        )
        parser.add_argument("--json", metavar="PATH", help="Write the JSON report here.")
        parser.add_argument("--markdown", metavar="PATH", help="Write the Markdown report here.")
        parser.add_argument("--provider", help="LLM provider (default: DETECTIVE_PROVIDER).")
        parser.add_argument("--model", help="Model (default: DETECTIVE_MODEL).")
        parser.add_argument("--base-url", help="Provider base URL (default: DETECTIVE_BASE_URL).")
        parser.add_argument(
            "--reasoning", help="Reasoning strategy: direct, self_check, plan (default: direct)."
        )
        parser.add_argument(
            "--judge", action="store_true", help="Also score each trial with an LLM judge."
        )
        parser.add_argument("--judge-provider", help="The judge's provider (default: the agent's).")
        parser.add_argument("--judge-model", help="The judge's model.")
        parser.add_argument("--judge-base-url", help="The judge's base URL.")
        parser.add_argument(
            "--tool-timeout",
            type=float,
            default=DEFAULT_TOOL_TIMEOUT_S,
            help=f"Seconds the release tools wait for the API ({DEFAULT_TOOL_TIMEOUT_S:g}).",
        )
        parser.add_argument(
            "--trial-timeout",
            type=float,
            default=DEFAULT_TRIAL_TIMEOUT_S,
            help=f"Seconds a trial may take before it is cancelled ({DEFAULT_TRIAL_TIMEOUT_S:g}).",
        )
        parser.add_argument(
            "--api-url",
            help="Use the release API of this running site instead of serving it in-process.",
        )
        parser.add_argument("--suite", metavar="DIR", help="Scenario directory (evals/scenarios).")
        parser.add_argument("--notes", default="", help="A note stored with the run.")

    def handle(self, *args: Any, **options: Any) -> None:
        console = Console(file=self.stdout._out, highlight=False, soft_wrap=True)
        if not console.is_terminal:
            # CI logs: wide enough for the summary table.
            console = Console(file=self.stdout._out, highlight=False, soft_wrap=True, width=120)
        if options["trials"] < 1 or options["concurrency"] < 1:
            raise CommandError(
                "--trials and --concurrency must be at least 1.", returncode=USAGE_ERROR
            )
        try:
            # Reviewers' labels join the shipped suite (not a suite given with --suite).
            extra = [] if options["suite"] else [settings.DETECTIVE_REVIEW_SCENARIOS_DIR]
            suite = load_suite(options["suite"], options["scenarios"], extra_dirs=extra)
        except ScenarioError as exc:
            raise CommandError("; ".join(exc.problems), returncode=USAGE_ERROR) from None
        against = self._against(options["compare"])
        eval_options = self._eval_options(options)
        problem = release_runner.configuration_problem(
            provider=eval_options.provider,
            model=eval_options.model,
            base_url=eval_options.base_url,
        )
        if problem:
            raise CommandError(problem, returncode=USAGE_ERROR)

        total = len(suite.scenarios) * eval_options.trials
        console.print(
            f"[bold]Suite {escape(suite.version)}[/]: {len(suite.scenarios)} scenario(s) x "
            f"{eval_options.trials} trial(s), {eval_options.concurrency} at a time"
        )
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("[dim]{task.fields[last]}"),
            console=console,
            transient=False,
        ) as progress:
            task = progress.add_task("Trials", total=total, last="")

            def on_start(run: EvalRun) -> None:
                progress.update(task, description=f"Run #{run.pk}")

            def on_trial(outcome: TrialOutcome) -> None:
                self._advance(progress, task, outcome)

            # Now, not in the first trial: what it loads (the process's telemetry, Django's
            # request spans) belongs in the frozen heap, and is set up before the quiet.
            instrument_web()
            freeze_startup_heap()
            # SIGTERM (a CI job's timeout) stops the run as Ctrl+C does: recorded as cancelled,
            # the trials done so far kept, instead of a process killed with its run "running".
            # Only the main thread may set a handler (a test calls the command from a worker
            # thread); elsewhere the caller owns the process's signals.
            main = threading.current_thread() is threading.main_thread()
            previous = signal.signal(signal.SIGTERM, signal.default_int_handler) if main else None
            try:
                with quiet_logs(options["verbosity"] < 2):
                    run = run_suite(
                        suite,
                        eval_options,
                        notes=options["notes"],
                        on_start=on_start,
                        on_trial=on_trial,
                    )
            except KeyboardInterrupt:
                raise CommandError(
                    "Interrupted; the run is cancelled and the trials done so far are kept.",
                    returncode=1,
                ) from None
            finally:
                if main:
                    signal.signal(signal.SIGTERM, previous)

        summary = run.run_summary()
        if summary is None:
            raise CommandError(f"Run #{run.pk} recorded no trial: {run.error}", returncode=1)
        print_summary(console, run, summary)
        shares = selectors.own_shares(run)
        for share in shares:
            console.print(escape(own_words_line(share.profile, share)))
        comparison = self._compare(console, run, against)
        write_reports(
            summary,
            comparison,
            json_path=options["json"],
            markdown_path=options["markdown"],
            own_words={s.profile: s for s in shares},
        )
        for kind in ("json", "markdown"):
            if options[kind]:
                console.print(f"[dim]{kind.capitalize()} report: {escape(options[kind])}[/]")
        self._mark_baseline(console, run, options["baseline"], comparison)
        if run.status != RunStatus.SUCCEEDED:
            raise CommandError(f"Run #{run.pk} failed: {run.error}", returncode=1)
        if comparison is not None and comparison.failed:
            raise CommandError(
                f"Regression: run #{run.pk} against #{comparison.baseline_run_id} is a fail.",
                returncode=1,
            )

    # ---- steps ---------------------------------------------------------------------------------

    def _against(self, target: str | None) -> EvalRun | None:
        """The run to compare with, found before anything runs (a typo fails fast)."""
        if target is None:
            return None
        try:
            return selectors.against_run(target)
        except selectors.NothingToCompare:
            raise CommandError(
                "There is no baseline to compare with yet: mark a run with --baseline "
                "(or on its page) first.",
                returncode=USAGE_ERROR,
            ) from None
        except Exception:
            raise CommandError(
                f"No eval run {target!r} to compare with (give a run id or 'baseline').",
                returncode=USAGE_ERROR,
            ) from None

    def _eval_options(self, options: dict[str, Any]) -> EvalOptions:
        provider, model, base_url = options["provider"], options["model"], options["base_url"]
        local = local_model_settings(provider, model, base_url)
        if local is not None:
            provider, model, base_url = local
        return EvalOptions(
            trials=options["trials"],
            concurrency=options["concurrency"],
            provider=provider,
            model=model,
            base_url=base_url,
            reasoning=options["reasoning"],
            tool_timeout_s=options["tool_timeout"],
            trial_timeout_s=options["trial_timeout"],
            api_url=options["api_url"],
            judge=options["judge"],
            judge_provider=options["judge_provider"],
            judge_model=options["judge_model"],
            judge_base_url=options["judge_base_url"],
        )

    def _advance(self, progress: Progress, task: TaskID, outcome: TrialOutcome) -> None:
        style = STATUS_STYLES.get(outcome.status, "white")
        last = (
            f"[{style}]{outcome.status}[/] {escape(outcome.scenario_id)} #{outcome.trial} "
            f"({outcome.seconds:.1f} s)"
        )
        progress.update(task, advance=1, last=last)

    def _compare(
        self, console: Console, run: EvalRun, against: EvalRun | None
    ) -> Comparison | None:
        if against is None:
            return None
        try:
            comparison = selectors.compare(run, against)
        except selectors.NothingToCompare as exc:
            raise CommandError(str(exc), returncode=USAGE_ERROR) from None
        print_comparison(console, comparison, against)
        return comparison

    def _mark_baseline(
        self, console: Console, run: EvalRun, wanted: bool, comparison: Comparison | None
    ) -> None:
        if not wanted:
            return
        if comparison is not None and comparison.failed:
            console.print("[yellow]Not marked as the baseline: the comparison failed.[/]")
            return
        try:
            services.mark_baseline(run)
        except ValueError as exc:
            console.print(f"[yellow]Not marked as the baseline: {escape(str(exc))}[/]")
            return
        console.print(f"Run #{run.pk} is now the baseline.")


# The scenarios make tools fail on purpose: the failures they log are expected, not news.
QUIETED = {"agent": logging.ERROR, "django.request": logging.CRITICAL, "asyncio": logging.CRITICAL}


@contextmanager
def quiet_logs(quiet: bool) -> Iterator[None]:
    """Keep the terminal to the progress bar and the summary (-v 2 shows everything)."""
    if not quiet:
        yield
        return
    loggers = {name: logging.getLogger(name) for name in QUIETED}
    before = {name: logger.level for name, logger in loggers.items()}
    for name, logger in loggers.items():
        logger.setLevel(max(QUIETED[name], logger.getEffectiveLevel()))
    try:
        yield
    finally:
        for name, logger in loggers.items():
            logger.setLevel(before[name])


def local_model_settings(
    provider: str | None, model: str | None, base_url: str | None
) -> tuple[str, str | None, str] | None:
    """For the local model (`local`) without a base URL: the server `local_model serve`
    started, if one runs (provider, model, base URL); None otherwise."""
    from django.conf import settings

    chosen = (provider or settings.CONFIG.provider or "").strip().lower()
    if chosen != "local" or base_url or settings.CONFIG.base_url:
        return None
    paths = LocalModelPaths.for_data_dir(Path(settings.DATA_DIR))
    server = running_server(paths)
    if server is None:
        raise CommandError(
            "DETECTIVE_PROVIDER=local needs a running local model: start it with "
            "`uv run manage.py local_model serve` (or set DETECTIVE_BASE_URL).",
            returncode=USAGE_ERROR,
        )
    return "local", model or MODEL.alias, server.url


# ---- the terminal summary -----------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _ci(interval: Any) -> str:
    return "" if interval is None else f" [dim]({interval.low:.0%} to {interval.high:.0%})[/]"


def print_summary(console: Console, run: EvalRun, summary: RunSummary) -> None:
    dims = summary.dimensions
    table = Table(title=f"Run #{run.pk} · suite {summary.suite_version}", title_justify="left")
    table.add_column("Scenario (* critical)", no_wrap=True)
    table.add_column("Status")
    table.add_column("Pass", justify="right")
    table.add_column("pass^k", justify="right")
    for dim in dims:
        table.add_column(dim.replace("_", " "), justify="right")
    for s in summary.scenarios:
        style = STATUS_STYLES.get(s.status, "white")
        name = escape(s.scenario_id) + (" [bold red]*[/]" if s.critical else "")
        table.add_row(
            name,
            f"[{style}]{s.status}[/]",
            f"{s.passed}/{s.evaluable}" + (f" +{s.errored}err" if s.errored else ""),
            "—" if s.pass_all is None else ("yes" if s.pass_all else "no"),
            *["—" if s.mean_score(dim) is None else f"{s.mean_score(dim):.2f}" for dim in dims],
        )
    console.print(table)
    latency = summary.latency_ms
    cost = f"${summary.cost_usd:.4f}" if summary.cost_usd is not None else "unknown"
    console.print(
        f"[bold]Pass rate {_pct(summary.pass_rate)}[/]{_ci(summary.pass_rate_ci)} · "
        f"pass^k {_pct(summary.pass_hat_k)} · {summary.passed} passed, {summary.failed} failed, "
        f"{summary.errored} errored of {summary.total_trials}"
    )
    console.print(
        "Mean scores: "
        + ", ".join(
            f"{dim.replace('_', ' ')} {stat.mean:.2f}{_ci_score(stat.ci)}"
            for dim, stat in dims.items()
        )
    )
    console.print(
        f"[dim]Tokens {summary.input_tokens + summary.output_tokens:,} · cost {cost} · "
        f"latency {latency.mean / 1000:.1f} s per trial[/]"
        if latency
        else f"[dim]Tokens {summary.input_tokens + summary.output_tokens:,} · cost {cost}[/]"
    )


def _ci_score(interval: Any) -> str:
    return "" if interval is None else f" [dim]({interval.low:.2f} to {interval.high:.2f})[/]"


def print_comparison(console: Console, comparison: Comparison, against: EvalRun) -> None:
    style = VERDICT_STYLES[comparison.verdict]
    console.print()
    console.print(
        f"[{style}]Verdict: {comparison.verdict.upper()}[/] against run #{against.pk}"
        + (" (the baseline)" if against.is_baseline else "")
    )
    for reason in comparison.reasons:
        console.print(f"  {escape(reason)}")
    for change in comparison.regressions:
        console.print(f"  [red]▼ {escape(change.message)}[/]")
    for change in comparison.drops:
        console.print(f"  [yellow]▽ {escape(change.message)}[/]")
    for change in comparison.improvements:
        console.print(f"  [green]▲ {escape(change.message)}[/]")
    for note in comparison.notes:
        console.print(f"  [dim]{escape(note)}[/]")
