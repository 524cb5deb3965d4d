"""The evals' seam into the agent: run every scenario K times, store and evaluate each trial.

```
run_suite(suite, options)                        (the command's thread)
  EvalRun: running, planned trials
  asyncio loop ───────────────────────────────────────────────────────────────────────
    at most `concurrency` trials at once (a semaphore), each:
      trial thread (ORM)                         the loop
        Conversation: eval trial, running,
        its API token                  ───▶  build_agent(release tools → the site's API
                                             with that token, ORM store), send the prompt
        store writes, in order, batched ◀───  store.append_event(...) returns at once
                                             tools: GET /api/releases/<id>/summary ...
        finish the Conversation         ◀───  the terminal event
        read back messages, events and
        the filed report → Transcript ───▶  evaluate (and the judge, if asked)
        EvalResult; progress published
    a heartbeat for the run and its running trials every few seconds
  EvalRun: summary, succeeded (or failed)
```

Trials share one event loop, so many run at once in one process. The agent calls its store
synchronously from inside the loop; here each call is queued for the database thread the
trial was given (a run has a few, shared in turn) and returns at once (write-behind), so no
trial waits on the database while others talk to the model; a trial's writes stay in order,
and it reads its record back only once they are done.

Scenario data reaches the agent the way a real release does: its release tools call the
site's API over HTTP with a per-run token. The token belongs to the trial's Conversation,
whose metadata carries the scenario (see `evals/api_source.py`), so the API serves the
scenario's data and faults, and keeps a filed report on the trial, never touching a real
release. Without `api_url` the site answers the API in-process, through its WSGI handler on a
pool of threads (`assessments/runner/in_process.py`): `run_evals` needs no web server.

A trial is *errored* (not counted as failed) when the provider fails, when it is cancelled at
its time limit, or when this harness fails; a crash of the agent's own code is its fault and
fails the trial (see `evals.runner.transcript`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import httpx
from opentelemetry import trace

from agent.cancel import CancelToken
from agent.config import AgentSettings, build_agent, build_model_provider
from agent.events import AgentEvent, ReportFiled, RunFailed
from agent.messages import Message as AgentMessage
from agent.messages import Usage
from agent.providers.protocol import ModelRequest, Provider
from agent.retry import RetryingProvider, RetryPolicy
from agent.telemetry import end_workflow, workflow_span
from agent.tls import async_client
from assessments import runner as release_runner
from assessments.runner.in_process import in_process_api, in_process_url
from assessments.runner.process import configure_process_telemetry, flush_telemetry
from assessments.runner.store import OrmConversationStore
from assessments.timeline import TERMINAL_KINDS
from evals import scenario_sources, services
from evals.evaluators.judge import LLMJudge
from evals.evaluators.trial import TrialResult, aevaluate
from evals.models import EvalRun
from evals.runner.store import DbThread, DbThreads, EvalInfrastructureError, WriteBehindStore
from evals.runner.transcript import FiledReport, RunError, Transcript
from evals.scenario import Scenario, Suite
from releases.models import RunStatus

logger = logging.getLogger(__name__)
_tracer = trace.get_tracer("detective.evals")

T = TypeVar("T")

HEARTBEAT_SECONDS = 2.0
PROGRESS_EVERY_S = 0.25
# The release tools' own timeout in evals: the API is in-process and answers in milliseconds,
# so the timeout scenarios need not wait the agent's default 10 s per try.
DEFAULT_TOOL_TIMEOUT_S = 3.0
DEFAULT_TRIAL_TIMEOUT_S = 600.0
# After the cancel at the time limit, how long the loop gets to end the run itself.
CANCEL_GRACE_S = 10.0
# Database threads of a run, shared by its trials in turn.
DB_THREADS = 4


@dataclass(frozen=True)
class EvalOptions:
    trials: int = 1
    concurrency: int = 4
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    reasoning: str | None = None
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S
    # Where the release tools find the API; None: this site, served in-process.
    api_url: str | None = None
    judge: bool = False
    judge_provider: str | None = None
    judge_model: str | None = None
    judge_base_url: str | None = None

    def config(self, settings: AgentSettings) -> dict[str, Any]:
        """What EvalRun.config records: the knobs that change results (no keys, no URLs)."""
        config: dict[str, Any] = {
            "concurrency": self.concurrency,
            "reasoning": settings.reasoning,
            "tool_timeout_s": self.tool_timeout_s,
            "judge": self.judge,
        }
        if self.judge:
            config["judge_model"] = self.judge_model or self.judge_provider or "same as agent"
        return config


@dataclass(frozen=True)
class TrialOutcome:
    """What the progress display hears after each trial."""

    scenario_id: str
    trial: int
    status: str
    seconds: float
    severity: str | None
    done: int
    total: int


# ---- settings and providers -------------------------------------------------------------------


def agent_settings(options: EvalOptions, *, api_url: str) -> AgentSettings:
    """The site's agent settings (as for assessments) with the run's overrides."""
    base = release_runner.agent_settings(
        api_url=api_url,
        provider=options.provider,
        model=options.model,
        base_url=options.base_url,
    )
    update: dict[str, Any] = {"tool_timeout": options.tool_timeout_s}
    if options.reasoning:
        update["reasoning"] = options.reasoning
    return base.model_copy(update=update)


def judge_settings(options: EvalOptions, agent: AgentSettings) -> AgentSettings:
    """The judge's provider: its own when given, else the agent's."""
    update = {
        key: value
        for key, value in (
            ("provider", options.judge_provider),
            ("model", options.judge_model),
            ("base_url", options.judge_base_url),
        )
        if value
    }
    if options.judge_provider and not options.judge_model:
        update["model"] = None  # the judge provider's default, not the agent's model
    return agent.model_copy(update=update)


JUDGE_SYSTEM = (
    "You grade the work of a release-risk assessment agent against a rubric. "
    "You answer with JSON only."
)


def provider_judge(provider: Provider) -> Callable[[str], Any]:
    """The LLM judge's callable over a provider: one completion, no tools."""

    async def judge(prompt: str) -> str:
        request = ModelRequest(
            system=JUDGE_SYSTEM,
            messages=[AgentMessage.user(prompt)],
            max_tokens=400,
            temperature=0.0,
        )
        response = await provider.complete(request)
        return response.message.content

    return judge


# ---- trial records ----------------------------------------------------------------------------


def _errored(scenario: Scenario, trial: int, suite_version: str, exc: BaseException) -> TrialResult:
    error = RunError(
        error_type=EvalInfrastructureError.__name__,
        message=f"{type(exc).__name__}: {exc}"[:500],
        category="infrastructure",
    )
    return TrialResult(
        scenario_id=scenario.id,
        trial=trial,
        status="errored",
        error=error,
        failure_reasons=[f"errored (infrastructure): {type(exc).__name__}"],
        suite_version=suite_version,
        scenario_fingerprint=scenario.fingerprint,
    )


# ---- the run ----------------------------------------------------------------------------------


ProviderFactory = Callable[[], Provider]


@dataclass
class SuiteRunner:
    """Runs the trials of one EvalRun (see the module docstring)."""

    run: EvalRun
    suite: Suite
    options: EvalOptions
    settings: AgentSettings
    http_client: httpx.AsyncClient | None = None
    # A ready provider per trial instead of the one the settings describe (tests).
    provider_factory: ProviderFactory | None = None
    judge: LLMJudge | None = None
    on_trial: Callable[[TrialOutcome], None] | None = None
    results: list[TrialResult] = field(default_factory=list)
    _active: set[Any] = field(default_factory=set)
    _progressed: bool = False
    _db: DbThreads | None = None
    # The release ingested for each scenario made of files, by scenario id.
    _releases: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.suite.scenarios) * self.options.trials

    async def execute(self) -> list[TrialResult]:
        semaphore = asyncio.Semaphore(max(1, self.options.concurrency))
        self._db = DbThreads(min(self.options.concurrency, DB_THREADS))
        if any(scenario.sources is not None for scenario in self.suite.scenarios):
            # Before any trial: each reads its scenario's release as ingested.
            try:
                ingested = await self._db.take().run(scenario_sources.ingest_suite, self.suite)
            except BaseException:
                await asyncio.shield(self._db.close())
                raise
            self.suite, self._releases = ingested.suite, ingested.releases
        tick = asyncio.create_task(self._tick())
        try:
            # Trial-major order: the first results already cover every scenario.
            await asyncio.gather(
                *(
                    self._trial(semaphore, scenario, trial)
                    for trial in range(1, self.options.trials + 1)
                    for scenario in self.suite.scenarios
                )
            )
        finally:
            tick.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await tick
            await asyncio.shield(self._db.close())
        return self.results

    async def _tick(self) -> None:
        """Progress for the pages (one message for trials that end together, at most
        PROGRESS_EVERY_S apart) and the heartbeat of the run and its running trials."""
        db = DbThread("evals-tick")
        last_beat = time.monotonic()
        try:
            while True:
                await asyncio.sleep(PROGRESS_EVERY_S)
                if self._progressed:
                    self._progressed = False
                    await db.run(services.publish_progress, self.run.pk)
                if time.monotonic() - last_beat >= HEARTBEAT_SECONDS:
                    last_beat = time.monotonic()
                    await db.run(services.heartbeat, self.run.pk, list(self._active))
        finally:
            await asyncio.shield(db.close())

    async def _trial(self, semaphore: asyncio.Semaphore, scenario: Scenario, trial: int) -> None:
        async with semaphore:
            started = time.monotonic()
            assert self._db is not None  # set by execute()
            db = self._db.take()
            conversation_id: Any = None
            try:
                conversation, token = await db.run(
                    services.start_trial,
                    self.run,
                    scenario,
                    trial,
                    provider=self.run.provider,
                    model=self.run.model,
                    tool_timeout_s=self.options.tool_timeout_s,
                    release_pk=self._releases.get(scenario.id),
                )
                conversation_id = conversation.pk
                self._active.add(conversation_id)
                transcript = await self._run_agent(db, scenario, conversation_id, token)
                result = await aevaluate(
                    scenario,
                    transcript,
                    judge=self.judge,
                    trial=trial,
                    suite_version=self.suite.version,
                )
            except Exception as exc:
                logger.exception("trial %s #%s could not be run", scenario.id, trial)
                result = _errored(scenario, trial, self.suite.version, exc)
            finally:
                self._active.discard(conversation_id)
            await db.run(
                services.record_result,
                self.run,
                result,
                conversation_id=conversation_id,
                publish=False,
            )
            self._progressed = True
            self.results.append(result)
            if self.on_trial is not None:
                report = TrialOutcome(
                    scenario_id=scenario.id,
                    trial=trial,
                    status=result.status,
                    seconds=time.monotonic() - started,
                    severity=result.severity_filed,
                    done=len(self.results),
                    total=self.total,
                )
                self.on_trial(report)

    async def _run_agent(
        self, db: DbThread, scenario: Scenario, conversation_id: Any, token: str
    ) -> Transcript:
        store = WriteBehindStore(OrmConversationStore(), db, str(conversation_id))
        agent = build_agent(
            self.settings,
            release_id=scenario.release_id,
            api_token=token,
            store=store,
            http_client=self.http_client,
            provider=self.provider_factory() if self.provider_factory is not None else None,
        )
        tools = getattr(agent, "tools", None)
        offered = [tool.name for tool in tools.get_tools()] if tools is not None else None
        # The trial's row is the agent's conversation: same id; the metadata the row
        # already has (the scenario) is kept, the agent's is merged into it.
        agent.conversation = agent.conversation.model_copy(update={"id": str(conversation_id)})
        cancel = CancelToken()
        limit = asyncio.get_running_loop().call_later(
            self.options.trial_timeout_s,
            cancel.set,
            f"the trial's time limit ({self.options.trial_timeout_s:g} s) was reached",
        )
        terminal: AgentEvent | None = None
        events: list[AgentEvent] = []
        started = time.monotonic()
        # The trial's root span; the agent's span (no trace of its own yet) hangs under it.
        root = workflow_span(
            _tracer,
            "eval_trial",
            conversation_id=str(conversation_id),
            release_id=scenario.release_id,
            attributes={
                "detective.eval.run_id": str(self.run.pk),
                "detective.eval.scenario": scenario.id,
            },
        )
        try:
            with trace.use_span(root):
                async with asyncio.timeout(self.options.trial_timeout_s + CANCEL_GRACE_S):
                    async for event in agent.send_message(scenario.prompt, cancel=cancel):
                        events.append(event)
                        if event.kind in TERMINAL_KINDS:
                            terminal = event
        finally:
            # A trial may rightly file nothing (a release that does not exist): only a run
            # that failed is an error here.
            filings = [e for e in events if isinstance(e, ReportFiled)]
            end_workflow(
                root,
                output={
                    "run_end": terminal.kind if terminal is not None else None,
                    "state": "filed" if filings else "no report",
                    "severity": filings[-1].severity if filings else None,
                },
                error=getattr(terminal, "message", None) or "the trial failed"
                if terminal is None or isinstance(terminal, RunFailed)
                else None,
            )
            root.end()
            limit.cancel()
            await agent.aclose()
            await store.flush()
        duration_ms = (time.monotonic() - started) * 1000
        conversation = agent.conversation
        # Saved by now (the flush above): the record is what the agent holds, and the report
        # is what the API kept on the trial.
        filed = await db.run(
            services.finish_trial,
            conversation_id,
            terminal.model_dump(mode="json") if terminal is not None else None,
            conversation.metadata,
        )
        error = None
        if terminal is None:
            error = RunError(
                error_type=EvalInfrastructureError.__name__,
                message="the run ended without a final event",
                category="infrastructure",
            )
        usage = conversation.metadata.get("usage")
        cost = conversation.metadata.get("estimated_cost_usd")
        return Transcript(
            scenario_id=scenario.id,
            messages=conversation.messages,
            events=events,
            report=FiledReport.model_validate(filed) if filed else None,
            error=error,
            usage=Usage.model_validate(usage) if usage else None,
            cost_usd=cost if isinstance(cost, int | float) else None,
            duration_ms=duration_ms,
            tools_offered=offered,
        )


async def run_trials(
    run: EvalRun,
    suite: Suite,
    options: EvalOptions,
    *,
    provider_factory: ProviderFactory | None = None,
    http_client: httpx.AsyncClient | None = None,
    judge: LLMJudge | None = None,
    on_trial: Callable[[TrialOutcome], None] | None = None,
) -> list[TrialResult]:
    """Run and record every trial of `run`; the run's own status is the caller's."""
    async with contextlib.AsyncExitStack() as stack:
        api_url = options.api_url
        if http_client is None:
            # One client for every trial's tools: in-process into this site, or to `api_url`.
            if api_url is None:
                client, api_url = in_process_api(threads=options.concurrency)
            else:
                client = async_client()
            http_client = await stack.enter_async_context(client)
        # And one for every adapter: a client each would cost each trial a TLS context.
        limits = httpx.Limits(max_connections=max(100, 2 * options.concurrency))
        model_client = await stack.enter_async_context(async_client(limits=limits))
        settings_ = agent_settings(options, api_url=api_url or in_process_url())
        if provider_factory is None:
            provider_factory = partial(build_model_provider, settings_, client=model_client)
        if judge is None and options.judge:
            adapter = build_model_provider(judge_settings(options, settings_), client=model_client)
            judge = LLMJudge(provider_judge(RetryingProvider(adapter, RetryPolicy())))
        runner = SuiteRunner(
            run=run,
            suite=suite,
            options=options,
            settings=settings_,
            http_client=http_client,
            provider_factory=provider_factory,
            judge=judge,
            on_trial=on_trial,
        )
        return await runner.execute()


def run_suite(
    suite: Suite,
    options: EvalOptions,
    *,
    notes: str = "",
    provider_factory: ProviderFactory | None = None,
    http_client: httpx.AsyncClient | None = None,
    judge: LLMJudge | None = None,
    on_start: Callable[[EvalRun], None] | None = None,
    on_trial: Callable[[TrialOutcome], None] | None = None,
) -> EvalRun:
    """Run the suite as a new EvalRun and return it, finished and summarised.

    The run succeeds when every trial was run and recorded, and at least one could be
    evaluated; a run whose every trial errored (the provider down, say) fails, as does one
    interrupted (Ctrl+C), which keeps and summarises the trials it finished.
    """
    configure_process_telemetry()
    identity = resolve_identity(options, provider_factory)
    run = services.start_run(
        suite,
        trials=options.trials,
        provider=identity[0],
        model=identity[1],
        config=options.config(agent_settings(options, api_url=options.api_url or in_process_url())),
        notes=notes,
    )
    if on_start is not None:
        on_start(run)
    try:
        results = asyncio.run(
            run_trials(
                run,
                suite,
                options,
                provider_factory=provider_factory,
                http_client=http_client,
                judge=judge,
                on_trial=on_trial,
            )
        )
    except KeyboardInterrupt:
        # Ctrl+C, or SIGTERM (run_evals turns it into the same): stopped, not broken.
        services.finish_run(
            run,
            suite=suite,
            status=RunStatus.CANCELLED,
            error="The run was cancelled: stopped by a signal (SIGINT or SIGTERM).",
        )
        raise
    except BaseException as exc:
        services.finish_run(
            run, suite=suite, status=RunStatus.FAILED, error=f"The run {type(exc).__name__}."
        )
        raise
    finally:
        flush_telemetry()
    if results and all(r.errored for r in results):
        services.finish_run(
            run,
            suite=suite,
            status=RunStatus.FAILED,
            error="Every trial errored: " + (results[0].error.message if results[0].error else ""),
        )
    else:
        services.finish_run(run, suite=suite)
    run.refresh_from_db()
    return run


def resolve_identity(
    options: EvalOptions, provider_factory: ProviderFactory | None = None
) -> tuple[str, str]:
    """The provider and model a run will use, as recorded on the run (validates them: a
    missing provider or key raises ConfigurationError before anything is stored)."""
    if provider_factory is not None:
        provider = provider_factory()
    else:
        agent = agent_settings(options, api_url=options.api_url or in_process_url())
        provider = build_model_provider(agent)
    try:
        return provider.name, provider.model or ""
    finally:
        _close_quietly(provider)


def _close_quietly(provider: Provider) -> None:
    try:
        asyncio.run(provider.aclose())
    except Exception:  # closing an unused client cannot matter
        logger.debug("closing a probe provider failed", exc_info=True)
