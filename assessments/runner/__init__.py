"""The seam: the one place the Django side runs the agent (`agent/`).

`run_assessment(conversation_id)` runs one queued assessment to its end, in the calling thread
(the task worker's, or `manage.py assess`'s):

```
task thread (ORM)                           agent thread (asyncio)
  mark running, issue the run's API token
  build the agent (ORM store, release tools
  pointed at the API with that token)  ───▶  agent.send_message("Assess the risk of ...")
  serve ORM jobs in order:            ◀───   store.append_event(...)  (waits for the save)
    save the event, then publish it
  heartbeat about once a second;
  Cancel pressed → cancel token       ───▶   the loop ends with RunCancelled
  save the terminal event, record the ◀───   the terminal event; the thread ends
    outcome, tokens, cost, then publish
```

The agent calls its store synchronously from inside its event loop, where Django's ORM must
not run (SynchronousOnlyOperation). So the loop runs on a thread of its own and every store
call becomes a job for the task's thread, which runs them one at a time, in the order they
came, and answers each before the agent goes on: events are saved in order and none is lost,
and each is published (rendered HTML to the channel group `run-<id>`) only once saved.

The run's trace continues the web request that queued it: the task carries its W3C
traceparent, the agent's spans hang under an `invoke_workflow assessment` span in that trace,
and the tools send their own traceparent to the API, whose request spans
(opentelemetry-instrumentation-django) join it too.

This package is the whole of `releases/`'s contact with `agent/`: besides this module, `store.py`
(the ORM ConversationStore the agent writes through), `traces.py` (a run's trace, read back
for the run page), `process.py` (what each process sets up: telemetry, its frozen heap) and
`in_process.py` (the site's API answered in this process, for `assess` and `run_evals`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from decimal import Decimal
from pathlib import Path
from types import FrameType
from typing import Any, Generic, TypeVar

import httpx
import pydantic
from django.conf import settings
from opentelemetry import propagate, trace

from agent.cancel import CancelToken
from agent.config import AgentSettings, build_agent, build_model_provider
from agent.errors import ConfigurationError
from agent.events import AgentEvent, RunFailed
from agent.messages import Conversation as AgentConversation
from agent.messages import Message as AgentMessage
from agent.store import ConversationSummary, StoredEvent
from agent.telemetry import end_workflow, workflow_span
from assessments import outcomes, services
from assessments.runner.database import DATABASE_ERRORS, DatabaseUnavailable, retrying
from assessments.runner.process import configure_process_telemetry, flush_telemetry
from assessments.runner.store import OrmConversationStore
from assessments.runner.trace_outcome import release_input, run_trace_outcome
from assessments.timeline import TERMINAL_KINDS, outcome
from releases.models import AgentEvent as EventRow
from releases.models import Conversation, RunStatus

logger = logging.getLogger(__name__)

T = TypeVar("T")

HEARTBEAT_SECONDS = 1.0
DEFAULT_API_URL = "http://127.0.0.1:8000"
_tracer = trace.get_tracer("detective.releases")


STOPPED_WITH_SITE = "stopped with the site"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _SiteStop:
    """SIGTERM/SIGINT to a task worker (the site stopping) cancels the run under way.

    The task worker (django-tasks' db_worker) would let the run go on to its end after a stop
    signal, and `up` kills it after a few seconds: the run would be left "running". So, while
    a run is under way, the worker's own handlers are wrapped: the signal also ends the run
    as cancelled ("stopped with the site") at the task thread's next look, within a fraction
    of a second; db_worker then exits after the task, as it meant to.
    """

    def __init__(self) -> None:
        self.enabled = False
        self.requested = threading.Event()

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        if not self.enabled or threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}

        def handle(signum: int, frame: FrameType | None) -> None:
            self.requested.set()
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)

        for signum in STOP_SIGNALS:
            signal.signal(signum, handle)
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


site_stop = _SiteStop()


def run_deadline_reason() -> str:
    seconds = float(settings.DETECTIVE_RUN_DEADLINE)
    return f"the assessment's deadline ({seconds:g} s, DETECTIVE_RUN_DEADLINE) passed"


def stop_runs_on_signals() -> None:
    """Called by the task worker: a stop signal cancels the run under way (see _SiteStop)."""
    site_stop.enabled = True


def prompt_for(version: str) -> str:
    return f"Assess the risk of release {version}"


def agent_settings(
    *,
    api_url: str,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
) -> AgentSettings:
    """The agent's settings: the site's configuration (which also reads `.env`) for the
    provider, with this run's overrides, the site's data dir and the API to call."""
    config = settings.CONFIG
    values: dict[str, Any] = {"data_dir": Path(settings.DATA_DIR), "api_url": api_url}
    for name, override in (("provider", provider), ("model", model), ("base_url", base_url)):
        value = override or getattr(config, name)
        if value:
            values[name] = value
    for key in ("anthropic_api_key", "openai_api_key", "openrouter_api_key"):
        if getattr(config, key) is not None:
            values[key] = getattr(config, key)
    return AgentSettings(**values)


def configuration_problem(
    *, provider: str | None = None, model: str | None = None, base_url: str | None = None
) -> str | None:
    """Why no agent could be built with these settings (one line), or None when it can."""
    try:
        adapter = build_model_provider(
            agent_settings(
                api_url=DEFAULT_API_URL, provider=provider, model=model, base_url=base_url
            )
        )
    except (ConfigurationError, pydantic.ValidationError) as exc:
        return _configuration_message(exc)
    asyncio.run(adapter.aclose())
    return None


def run_assessment(
    conversation_id: str,
    traceparent: str = "",
    *,
    api_url: str | None = None,
    http_client: httpx.AsyncClient | None = None,
    base_url: str | None = None,
    on_event: Callable[[EventRow], None] | None = None,
    follow_up: Callable[[uuid.UUID, str], None] | None = None,
) -> str:
    """Run a queued assessment to its end; return its final status.

    - `api_url`: where the tools find the release API (default: DETECTIVE_API_URL, which
      `manage.py up` sets to its web server's address).
    - `http_client`: the client the tools use (`assess` routes it into the site in-process).
    - `base_url`: the provider's base URL, instead of DETECTIVE_BASE_URL.
    - `on_event`: also called with each saved event (`assess` prints them).
    - `follow_up`: enqueues a new run when data arrived during this one (the worker's;
      `services.finish_run`).
    """
    configure_process_telemetry()
    run = services.mark_running(conversation_id)
    if run is None:
        status = Conversation.objects.filter(pk=conversation_id).values_list("status", flat=True)
        logger.info("run %s is not queued any more; nothing to do", conversation_id)
        return status.first() or "missing"
    parent = propagate.extract({"traceparent": traceparent}) if traceparent else None
    span = workflow_span(
        _tracer,
        "assessment",
        conversation_id=str(run.pk),
        release_id=_version(run),
        context=parent,
        input_value=release_input(run),
    )
    status: str = RunStatus.FAILED
    try:
        with site_stop.watching(), trace.use_span(span, end_on_exit=False):
            status = _Run(run, api_url, http_client, base_url, on_event, follow_up).execute()
            return status
    finally:
        # The outcome, then the end before the flush, so the root is in the trace file with
        # its verdict when the run is over.
        output, error = run_trace_outcome(run.pk, status)
        end_workflow(span, output=output, error=error)
        span.end()
        flush_telemetry()


def _version(run: Conversation) -> str:
    return run.release.version if run.release is not None else ""


class _Run:
    def __init__(
        self,
        run: Conversation,
        api_url: str | None,
        http_client: httpx.AsyncClient | None,
        base_url: str | None,
        on_event: Callable[[EventRow], None] | None,
        follow_up: Callable[[uuid.UUID, str], None] | None = None,
    ) -> None:
        self.run = run
        self.follow_up = follow_up
        self.api_url = api_url or settings.DETECTIVE_API_URL or DEFAULT_API_URL
        self.http_client = http_client
        self.base_url = base_url
        self.on_event = on_event
        self.jobs: queue.Queue[_Job[Any]] = queue.Queue()
        self.store = OrmConversationStore(on_saved=self._saved)
        self.cancel = CancelToken()
        self.deadline = time.monotonic() + float(settings.DETECTIVE_RUN_DEADLINE)
        self.terminal: AgentEvent | None = None
        self.crash: BaseException | None = None
        self.agent: Any = None
        # The run's final status once it is recorded (with its terminal event).
        self.status: str | None = None

    def execute(self) -> str:
        run = self.run
        token = services.issue_run_token(run.pk)
        try:
            agent = build_agent(
                agent_settings(
                    api_url=self.api_url,
                    provider=run.provider or None,
                    model=run.model or None,
                    base_url=self.base_url,
                ),
                release_id=_version(run),
                api_token=token,
                store=_ThreadedStore(self.store, self.jobs),
                http_client=self.http_client,
            )
        except (ConfigurationError, pydantic.ValidationError) as exc:
            # Nothing ran: say why on the page, as the agent would have.
            message = _configuration_message(exc)
            self.store.append_event(
                str(run.pk), RunFailed(error_type="ConfigurationError", message=message)
            )
            return self.status or RunStatus.FAILED
        # The run's row is the agent's conversation: same id, and the trace goes on from here.
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        metadata = {**agent.conversation.metadata, **carrier}
        if run.trace_id:
            metadata["trace_id"] = run.trace_id
        agent.conversation = agent.conversation.model_copy(
            update={"id": str(run.pk), "metadata": metadata}
        )
        self.agent = agent
        thread = threading.Thread(
            target=self._drive, args=(agent, prompt_for(_version(run))), name=f"run-{run.pk}"
        )
        thread.start()
        self._serve(thread)
        return self._conclude()

    # ---- the agent's thread -------------------------------------------------------------

    def _drive(self, agent: Any, prompt: str) -> None:
        async def consume() -> None:
            try:
                async for event in agent.send_message(prompt, cancel=self.cancel):
                    if event.kind in TERMINAL_KINDS:
                        self.terminal = event
            finally:
                await agent.aclose()

        try:
            asyncio.run(consume())
        except BaseException as exc:  # a bug: reported by the task's thread
            self.crash = exc

    # ---- the task's thread: ORM jobs, heartbeats, cancellation ------------------------------

    def _serve(self, thread: threading.Thread) -> None:
        last_beat = time.monotonic()
        while thread.is_alive() or not self.jobs.empty():
            try:
                job = self.jobs.get(timeout=0.2)
            except queue.Empty:
                job = None
            if job is not None:
                job.run()
            if site_stop.requested.is_set() and not self.cancel.is_set:
                logger.warning("run %s: %s", self.run.pk, STOPPED_WITH_SITE)
                self.cancel.set(STOPPED_WITH_SITE)
            if time.monotonic() > self.deadline and not self.cancel.is_set:
                logger.warning("run %s: %s", self.run.pk, run_deadline_reason())
                self.cancel.set(run_deadline_reason())
            if time.monotonic() - last_beat >= HEARTBEAT_SECONDS:
                last_beat = time.monotonic()
                self._beat()
        thread.join()

    def _beat(self) -> None:
        try:
            pulse = services.heartbeat(self.run.pk)
        except DATABASE_ERRORS:
            return  # the database restarting: the next store call waits for it (retrying)
        if pulse is services.Pulse.CANCEL:
            self.cancel.set("cancelled from the run page")
        elif pulse is services.Pulse.GONE:
            self.cancel.set("the run was ended elsewhere")

    def _saved(self, event: EventRow) -> None:
        if event.kind in TERMINAL_KINDS and self.status is None:
            # Recorded before anyone hears of it: a page that reloads when it sees the run
            # end must find the run ended, not still running with its end in the timeline.
            status, error = outcome(event.kind, event.payload)
            if status == RunStatus.CANCELLED and self.cancel.reason == STOPPED_WITH_SITE:
                error = "The run was cancelled: stopped with the site (the worker was stopping)."
            elif status == RunStatus.CANCELLED and self.cancel.reason == run_deadline_reason():
                # Nobody asked for this stop: the run failed to finish in time.
                status, error = RunStatus.FAILED, f"The run was stopped: {run_deadline_reason()}."
            # The verdict the run reached is stored before the run is over: a page or a
            # pipeline that sees it end finds the report there.
            try:
                concluded = retrying(
                    lambda: outcomes.conclude(self.run, event.kind, event.payload, status, error)
                )
            except DatabaseUnavailable as unavailable:
                concluded = outcomes.Concluded(
                    RunStatus.FAILED, str(unavailable), "no_report", "storing the verdict failed"
                )
            except Exception:
                # A bug: the run still ends, failed, saying so; the log has the traceback.
                logger.exception("run %s: storing its verdict failed", self.run.pk)
                concluded = outcomes.Concluded(
                    RunStatus.FAILED,
                    error or "Storing the run's verdict failed; see the worker's log.",
                    "no_report",
                    "storing the verdict failed",
                )
            self.status = retrying(
                lambda: self._finish(
                    concluded.status,
                    concluded.error,
                    outcome=concluded.outcome,
                    outcome_detail=concluded.detail,
                    **self._totals(),
                )
            )
        services.publish_event(event)
        if self.on_event is not None:
            self.on_event(event)

    def _totals(self) -> dict[str, Any]:
        """Tokens and cost so far, from the agent's metadata (read while the agent waits for
        the store call that brought the terminal event)."""
        metadata = self.agent.conversation.metadata if self.agent is not None else {}
        usage = metadata.get("usage") or {}
        cost = metadata.get("estimated_cost_usd")
        return {
            "input_tokens": usage.get("input_tokens"),
            "output_tokens": usage.get("output_tokens"),
            "estimated_cost": Decimal(str(round(cost, 6))) if cost is not None else None,
        }

    def _conclude(self) -> str:
        if self.crash is not None or self.terminal is None:
            logger.error("run %s crashed", self.run.pk, exc_info=self.crash)
        if self.status is None:  # the agent ended without a terminal event: a bug
            error_type, message = (
                "InternalError",
                "Unexpected internal error; see the worker's log for details",
            )
            if isinstance(self.crash, DatabaseUnavailable):
                error_type, message = "DatabaseUnavailable", str(self.crash)
            ending = RunFailed(error_type=error_type, message=message)
            retrying(lambda: self.store.append_event(str(self.run.pk), ending))
        return self.status or RunStatus.FAILED

    def _finish(self, status: str, error: str, **totals: Any) -> str:
        if not services.finish_run(
            self.run.pk, status=status, error=error, follow_up=self.follow_up, **totals
        ):
            # Ended by someone else meanwhile (the sweep): theirs is the verdict.
            ended = Conversation.objects.get(pk=self.run.pk).status
            logger.warning("run %s was already %s", self.run.pk, ended)
            return ended
        logger.info("run %s %s", self.run.pk, status)
        return status


def _configuration_message(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        problems = "; ".join(
            f"DETECTIVE_{'_'.join(str(p) for p in error['loc']).upper()}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        return f"Invalid agent settings: {problems}"
    return str(exc)


# ---- store calls from the agent's thread, run on the task's thread ------------------------------


class _Job(Generic[T]):
    def __init__(self, call: Callable[[], T]) -> None:
        self.call = call
        self.future: Future[T] = Future()

    def run(self) -> None:
        try:
            self.future.set_result(self.call())
        except BaseException as exc:
            self.future.set_exception(exc)


class _ThreadedStore:
    """The ORM store for the agent's thread: each call is a job the task's thread runs, in
    order, while the agent waits for its answer (the protocol is synchronous)."""

    def __init__(self, store: OrmConversationStore, jobs: queue.Queue[_Job[Any]]) -> None:
        self._store = store
        self._jobs = jobs

    def _call(self, call: Callable[[], T]) -> T:
        # A database restarting costs the agent a wait, not the run (assessments.runner.database).
        job = _Job(lambda: retrying(call))
        self._jobs.put(job)
        return job.future.result()

    def create(self, conversation: AgentConversation) -> None:
        self._call(lambda: self._store.create(conversation))

    def append_message(self, conversation_id: str, message: AgentMessage) -> None:
        self._call(lambda: self._store.append_message(conversation_id, message))

    def append_event(self, conversation_id: str, event: AgentEvent) -> int:
        return self._call(lambda: self._store.append_event(conversation_id, event))

    def load(self, conversation_id: str) -> AgentConversation:
        return self._call(lambda: self._store.load(conversation_id))

    def load_events(self, conversation_id: str, after: int = 0) -> list[StoredEvent]:
        return self._call(lambda: self._store.load_events(conversation_id, after))

    def list(self) -> list[ConversationSummary]:
        return self._call(self._store.list)

    def update_metadata(self, conversation_id: str, **metadata: Any) -> None:
        self._call(lambda: self._store.update_metadata(conversation_id, **metadata))
