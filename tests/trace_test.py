"""One trace across processes: a run started by a click is one trace, from the web request
through the worker's task and the agent to the API requests its tools make.

The site runs as under `manage.py up` (daphne and a task worker, processes of their own) with
tracing on; each process writes its spans to `<data dir>/traces`, and the trace file of the
run holds them all.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from agent.telemetry import TelemetryConfig, read_trace
from releases.models import Conversation, Release, RunStatus
from tests.live_site import LiveSite
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = "POST releases/<str:version>/reassess"
ROOT = "invoke_workflow assessment"
EXPECTED_SPANS = {
    REQUEST,
    ROOT,
    "invoke_agent detective",
    "execute_tool get_release_summary",
    "GET api/releases/<str:version>/summary",
    "execute_tool file_risk_report",
    "POST api/risk-reports",
}


def wait_for_spans(
    trace_id: str, wanted: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    traces = TelemetryConfig(data_dir=Path(settings.DATA_DIR)).traces_dir
    deadline = time.monotonic() + 20  # each process exports its spans within about a second
    while True:
        spans = read_trace(traces, trace_id)
        if wanted(spans) or time.monotonic() > deadline:
            return spans
        time.sleep(0.2)


def test_a_run_started_from_the_web_is_one_trace_across_processes(
    make_release: Callable[..., Release], admin_user: User, tmp_path: Path
) -> None:
    release = make_release("v3.0.0")
    with (
        ScriptedLLM() as llm,
        LiveSite(tmp_path, {**llm.environment(), "DETECTIVE_TELEMETRY": "on"}) as site,
    ):
        client = site.client(admin_user)
        response = client.post(
            f"/releases/{release.version}/reassess", headers={"HX-Request": "true"}
        )
        assert response.status_code == 200, response.text
        run_id = response.headers["HX-Redirect"].strip("/").split("/")[-1]
        deadline = time.monotonic() + 30
        while (run := Conversation.objects.get(pk=run_id)).is_active:
            assert time.monotonic() < deadline, site.log_text()
            time.sleep(0.1)
        assert run.status == RunStatus.SUCCEEDED, run.error
        assert run.trace_id

        spans = wait_for_spans(run.trace_id, lambda spans: names(spans) >= EXPECTED_SPANS)
        page = client.get(f"/runs/{run.pk}/")

    by_name = {span["name"]: span for span in spans}  # the last of each name
    assert names(spans) >= EXPECTED_SPANS, sorted(names(spans))
    assert {span["trace_id"] for span in spans} == {run.trace_id}
    # One tree: the web request at its root, every other span's parent in the trace.
    ids = {span["span_id"] for span in spans}
    roots = [span for span in spans if span["parent_span_id"] is None]
    assert [root["name"] for root in roots] == [REQUEST]
    assert all(span["parent_span_id"] in ids for span in spans if span not in roots)

    def parent(name: str) -> str:
        parent_id = by_name[name]["parent_span_id"]
        return next(span["name"] for span in spans if span["span_id"] == parent_id)

    assert parent(ROOT) == REQUEST
    assert parent("invoke_agent detective") == ROOT
    chats = [span for span in spans if span["name"].startswith("chat ")]
    assert len(chats) == 2
    assert parent("execute_tool get_release_summary") == "invoke_agent detective"
    assert parent("GET api/releases/<str:version>/summary") == "execute_tool get_release_summary"
    assert parent("POST api/risk-reports") == "execute_tool file_risk_report"
    # Written by two processes: the web server's spans and the worker's.
    process = {name: span["resource"]["service.instance.id"] for name, span in by_name.items()}
    assert process[REQUEST] == process["POST api/risk-reports"]
    assert process[ROOT] == process["invoke_agent detective"]
    assert process[REQUEST] != process[ROOT]

    # The run page's trace view shows the whole tree.
    assert page.status_code == 200
    waterfall = page.text[page.text.index('id="trace-heading"') :]
    for name in (*EXPECTED_SPANS, "chat scripted-detective"):
        assert html.escape(name) in waterfall, name
    assert f"{len(spans)} spans" in waterfall


def names(spans: list[dict[str, Any]]) -> set[str]:
    return {span["name"] for span in spans}
