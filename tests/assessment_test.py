"""Assessments end to end against a scripted model server speaking OpenAI's streaming format.

The runner runs the real agent; its tools call the site's API (in-process, as `manage.py
assess` does, or over HTTP from a real worker process); the database is the real one
(SQLite file, or PostgreSQL in CI's second pass) and so is the channel layer (the SQLite
layer, or Redis).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import SyncToAsync
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, connections
from django.test import Client
from django_tasks_db.models import DBTaskResult

from assessments import runner, services, tasks
from releases.models import AgentEvent, Conversation, Release, RiskReport, RunStatus
from tests.live_site import start_worker, subprocess_environment
from tests.llm_server import MODEL, ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True, scope="module")
def _close_thread_connections() -> Iterator[None]:
    """Sync code called from async code (the consumer, the API served in-process) runs on
    asgiref's one shared thread, whose connection would outlive the tests and keep
    PostgreSQL from dropping the test database."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def release(make_release: Callable[..., Release]) -> Release:
    return make_release(
        "v2.1.0",
        test_results={"passed": 140, "failed": 2, "skipped": 0},
        changes=["<script>alert(1)</script> payments"],
    )


def in_process_client() -> httpx.AsyncClient:
    from detective_site.asgi import application

    return httpx.AsyncClient(transport=httpx.ASGITransport(app=application))


def assess(release: Release, base_url: str, **overrides: Any) -> Conversation:
    run = services.start_assessment(
        release, None, provider="openai-compatible", model=MODEL, enqueue=tasks.enqueue_assessment
    )
    runner.run_assessment(
        str(run.pk), api_url="http://localhost", http_client=in_process_client(), base_url=base_url
    )
    run.refresh_from_db()
    return run


def kinds(run: Conversation) -> list[str]:
    return list(run.events.order_by("seq").values_list("kind", flat=True))


def test_a_run_files_its_report_and_keeps_every_step(llm: ScriptedLLM, release: Release) -> None:
    run = assess(release, llm.base_url)
    assert run.status == RunStatus.SUCCEEDED, run.error
    report = RiskReport.objects.get(conversation=run)
    assert (report.release, report.severity) == (release, "high")
    seqs = list(run.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    names = kinds(run)
    assert names[0] == "run_started" and names[-1] == "run_finished"
    assert names.count("tool_call") == names.count("tool_result") == 2
    assert "text_delta" in names and "report_filed" in names
    assert (run.input_tokens, run.output_tokens) == (420 + 780, 38 + 96)
    assert run.started_at and run.finished_at and run.api_token_hash == ""
    assert [m.role for m in run.messages.order_by("position")][:2] == ["user", "assistant"]
    # The tools authenticated with the run's own token.
    assert llm.requests[0]["model"] == MODEL


def test_the_outcome_is_recorded_before_the_end_of_the_run_is_published(
    llm: ScriptedLLM, release: Release
) -> None:
    """A page that reloads when it sees the run end must find the run ended."""
    seen: list[str] = []

    def on_event(event: AgentEvent) -> None:  # called once the event is published
        if event.kind == "run_finished":
            seen.append(Conversation.objects.get(pk=event.conversation_id).status)

    run = services.start_assessment(
        release, None, provider="openai-compatible", model=MODEL, enqueue=tasks.enqueue_assessment
    )
    runner.run_assessment(
        str(run.pk),
        api_url="http://localhost",
        http_client=in_process_client(),
        base_url=llm.base_url,
        on_event=on_event,
    )
    assert seen == [RunStatus.SUCCEEDED]


def test_a_bad_api_key_fails_the_run_with_the_cause(release: Release) -> None:
    with ScriptedLLM(mode="unauthorized") as llm:
        run = assess(release, llm.base_url)
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("The model provider refused the credentials")
    assert "Incorrect API key" in run.error
    assert kinds(run)[-1] == "run_failed"


def test_an_unreachable_provider_fails_the_run_with_the_cause(release: Release) -> None:
    with ScriptedLLM() as llm:
        base_url = llm.base_url  # a port nobody listens on once it stops
    run = assess(release, base_url)
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("The model provider could not be reached")
    assert "retry_scheduled" in kinds(run)


def test_without_a_provider_the_run_fails_saying_how_to_configure_one(
    release: Release, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DETECTIVE_PROVIDER", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(settings.CONFIG, "provider", None)
    run = services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    assert runner.run_assessment(str(run.pk)) == RunStatus.FAILED
    run.refresh_from_db()
    assert "DETECTIVE_PROVIDER" in run.error
    assert kinds(run) == ["run_failed"]


def test_cancel_ends_a_running_assessment_within_seconds(release: Release) -> None:
    with ScriptedLLM(delay=0.05, narration=400) as llm:
        run = services.start_assessment(
            release,
            None,
            provider="openai-compatible",
            model=MODEL,
            enqueue=tasks.enqueue_assessment,
        )
        worker = threading.Thread(
            target=_run_in_thread, args=(str(run.pk), llm.base_url), daemon=True
        )
        worker.start()
        deadline = time.monotonic() + 20
        while not AgentEvent.objects.filter(conversation=run, kind="text_delta").exists():
            assert time.monotonic() < deadline, "the run never started streaming"
            time.sleep(0.05)
        cancelled_at = time.monotonic()
        services.cancel_assessment(run)
        worker.join(timeout=15)
        assert not worker.is_alive()
        assert time.monotonic() - cancelled_at < 5
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert kinds(run)[-1] == "run_cancelled"
    assert run.messages.filter(metadata__partial=True).exists()  # what it had said is kept


def _run_in_thread(run_id: str, base_url: str) -> None:
    try:
        runner.run_assessment(
            run_id, api_url="http://localhost", http_client=in_process_client(), base_url=base_url
        )
    finally:
        connection.close()


def test_ten_simultaneous_reassess_clicks_make_one_run(release: Release, admin_user: User) -> None:
    barrier = threading.Barrier(10)
    answers: list[str] = []

    def click() -> None:
        client = Client()
        client.force_login(admin_user)
        barrier.wait()
        response = client.post(
            f"/releases/{release.version}/reassess", headers={"HX-Request": "true"}
        )
        answers.append(response["HX-Redirect"])
        connections.close_all()

    threads = [threading.Thread(target=click) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    run = Conversation.objects.get(release=release)
    assert answers == [f"/runs/{run.pk}/"] * 10
    assert run.status == RunStatus.QUEUED and run.task_id


# ---- a real worker process ---------------------------------------------------------------------


def wait_for(check: Callable[[], bool], timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; worker log:\n{log.read_text()}")
        time.sleep(0.1)


def test_a_killed_worker_leaves_a_failed_run_and_its_events_crossed_processes(
    release: Release, live_server: Any, tmp_path: Path, settings: Any
) -> None:
    settings.DETECTIVE_RUN_STALE_SECONDS = 5
    log = tmp_path / "worker.log"
    received: list[dict[str, Any]] = []
    with ScriptedLLM(delay=0.05, narration=600) as llm:
        environment = subprocess_environment(
            {**llm.environment(), "DETECTIVE_API_URL": live_server.url}
        )
        worker = start_worker(environment, log)
        try:
            listening: threading.Thread | None = None

            def enqueue_once_listening(run_id: uuid.UUID, traceparent: str) -> None:
                # Subscribed before the worker can pick the run up: on a loaded machine the
                # listener joined late and missed the first events (2 of them, in CI).
                nonlocal listening
                subscribed = threading.Event()
                listening = threading.Thread(
                    target=_listen, args=(str(run_id), received, subscribed), daemon=True
                )
                listening.start()
                assert subscribed.wait(30), "the listener did not subscribe"
                tasks.enqueue_assessment(run_id, traceparent)

            run = services.start_assessment(release, None, enqueue=enqueue_once_listening)
            assert listening is not None
            wait_for(
                lambda: AgentEvent.objects.filter(conversation=run, kind="text_delta").count() > 5,
                60,
                "the worker to stream",
                log,
            )
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=10)
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING  # nobody knows yet
    wait_for(lambda: bool(services.fail_stale_runs()), 20, "the sweep to notice", log)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    # Its worker was on this machine and is gone: failed at once, not after the stale delay.
    assert run.error.startswith(f"The worker running it (pid {worker.pid}) stopped")
    assert kinds(run)[-1] == "run_failed"
    task = DBTaskResult.objects.get(pk=run.task_id)
    assert (task.status, task.traceback) == ("FAILED", run.error)  # the task row agrees
    # The worker's events reached this process through the configured channel layer, in order.
    listening.join(timeout=10)
    seqs = [message["seq"] for message in received]
    assert len(seqs) >= 5 and seqs == sorted(seqs), seqs


def _listen(run_id: str, received: list[dict[str, Any]], subscribed: threading.Event) -> None:
    async def listen() -> None:
        # A layer of its own: the process-wide one keeps per-channel asyncio locks that other
        # threads' event loops have used, and channels_redis then fails here with "bound to a
        # different event loop" after two messages (CI, PostgreSQL + Redis).
        layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        channel = await layer.new_channel()
        await layer.group_add(services.run_group(run_id), channel)
        subscribed.set()
        try:
            while True:
                # The worker may take long to start on a busy machine: wait for its first
                # event as long as the test waits for it to stream, then 8 s between events.
                timeout = 8 if received else 60
                message = await asyncio.wait_for(layer.receive(channel), timeout=timeout)
                received.append(message)
                if message.get("terminal"):
                    return
        except TimeoutError:
            return
        finally:
            closing = getattr(layer, "close_pools", None) or layer.close
            await closing()

    asyncio.run(listen())


HIGH_RISK = {
    "test_results": {
        "passed": 88,
        "failed": 12,
        "skipped": 0,
        "failing_tests": ["test_checkout_total", *[f"test_layout_{i}" for i in range(11)]],
    },
    "deployment_metrics": {"error_rate": 0.09, "response_time_p95": 380},
}


def test_a_model_that_always_files_low_never_gets_an_accepted_low_report(
    make_release: Callable[..., Release],
) -> None:
    release = make_release("v9.9.9", **HIGH_RISK)
    with ScriptedLLM(mode="always-low") as llm:
        run = assess(release, llm.base_url)
    assert run.status == RunStatus.SUCCEEDED, run.error
    report = RiskReport.objects.get(conversation=run)
    # Refused once, filed again unchanged: kept, but for a person, with the policy's verdict.
    assert (report.severity, report.policy_severity, report.needs_review) == ("low", "high", True)
    assert any("Error rate 9 %" in reason for reason in report.review_reasons)
    refusals = [
        e.payload for e in run.events.filter(kind="tool_result") if "not filed" in str(e.payload)
    ]
    assert len(refusals) == 1


def test_a_model_that_corrects_itself_after_the_refusal_files_the_policys_severity(
    make_release: Callable[..., Release],
) -> None:
    release = make_release("v9.9.8", **HIGH_RISK)
    with ScriptedLLM(mode="low-then-corrects") as llm:
        run = assess(release, llm.base_url)
    assert run.status == RunStatus.SUCCEEDED, run.error
    report = RiskReport.objects.get(conversation=run)
    assert (report.severity, report.needs_review) == ("high", False)
    assert all(part["grounded"] for part in report.grounding)
