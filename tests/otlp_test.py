"""What an OpenTelemetry viewer receives: the site runs as under `manage.py up` (web server and a
task worker) with only the standard OTEL_* variables pointing it at an OTLP/HTTP receiver in
this test, and content capture on. A user browses a few pages, presses Reassess and watches the
run page's websocket; the receiver decodes what arrives (protobuf, as a collector would).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from bench.ws import WebSocket
from releases.models import Conversation, Release, RunStatus
from tests.live_site import LiveSite
from tests.llm_server import MODEL, ScriptedLLM
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan

pytestmark = pytest.mark.django_db(transaction=True)

VERSION = "v3.1.0"
FAILING_VERSION = "v3.1.1"
PAGES = {"/", "/releases/", f"/releases/{VERSION}/", "/static/css/detective.css"}
# The server spans a run makes: what is traced by default besides the run's own spans.
TRACED_REQUESTS = {
    "POST releases/<version:version>/reassess",
    "GET api/releases/<str:version>/summary",
    "POST api/risk-reports",
    "WS ws/runs/<uuid:run_id>/",
}


def environment(receiver: OtlpReceiver, llm: ScriptedLLM) -> dict[str, str]:
    return {
        **llm.environment(),
        "DETECTIVE_TELEMETRY": "on",
        "DETECTIVE_CAPTURE_CONTENT": "true",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_EXPORTER_OTLP_HEADERS": "x-otlp-key=test-key-123",
        "OTEL_SERVICE_NAME": "detective-otlp-test",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=ci",
        # Sooner than the SDK's defaults (5 s for spans, 60 s for metrics): a test waits.
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }


def test_a_viewer_receives_kinds_content_tokens_and_sessions_and_no_page_views(
    make_release: Callable[..., Release], admin_user: User, tmp_path: Path
) -> None:
    release = make_release(VERSION)
    with (
        OtlpReceiver() as receiver,
        ScriptedLLM() as llm,
        LiveSite(tmp_path, environment(receiver, llm)) as site,
    ):
        client = site.client(admin_user)
        for page in PAGES:
            assert client.get(page).status_code == 200, page
        response = client.post(
            f"/releases/{release.version}/reassess", headers={"HX-Request": "true"}
        )
        assert response.status_code == 200, response.text
        run_id = response.headers["HX-Redirect"].strip("/").split("/")[-1]
        close_code = asyncio.run(watch(site, client.cookies["sessionid"], run_id))
        run = Conversation.objects.get(pk=run_id)
        assert run.status == RunStatus.SUCCEEDED, run.error
        assert close_code == 1000

        def complete(r: OtlpReceiver) -> bool:
            names = {span.name for span in r.spans}
            tokens = token_sums(r)
            return (
                names >= TRACED_REQUESTS
                and "invoke_workflow assessment" in names
                and (tokens.get("input") == 1200)
            )

        arrived = receiver.wait_for(complete)
        assert arrived, (
            sorted({s.name for s in receiver.spans}),
            token_sums(receiver),
            site.log_text(),
        )

        # A run that fails (the provider refuses the key) stores no verdict: its root says so.
        failing = make_release(FAILING_VERSION)
        llm.configure(mode="unauthorized")
        response = client.post(
            f"/releases/{failing.version}/reassess", headers={"HX-Request": "true"}
        )
        failed_id = response.headers["HX-Redirect"].strip("/").split("/")[-1]
        asyncio.run(watch(site, client.cookies["sessionid"], failed_id))
        failed_run = Conversation.objects.get(pk=failed_id)
        assert failed_run.status == RunStatus.FAILED, failed_run.status

        def failed_root(r: OtlpReceiver) -> bool:
            return any(
                s.name == "invoke_workflow assessment" and s.trace_id == failed_run.trace_id
                for s in r.spans
            )

        assert receiver.wait_for(failed_root), site.log_text()
        spans = receiver.spans

    run_trace = [span for span in spans if span.trace_id == run.trace_id]
    by_name = {span.name: span for span in run_trace}

    # No page view, static file or login was sent; the run's requests and the websocket were.
    servers = {span.name for span in spans if span.kind == "SERVER"}
    assert servers == TRACED_REQUESTS, servers
    assert not any(
        str(span.attributes.get("http.target") or span.attributes.get("url.path")) in PAGES
        for span in spans
    )

    # The root: a workflow (a CHAIN in OpenInference), with the release and the run.
    root = by_name["invoke_workflow assessment"]
    assert root.kind == "INTERNAL"
    assert root.parent_span_id == by_name["POST releases/<version:version>/reassess"].span_id
    assert root.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert root.attributes["gen_ai.workflow.name"] == "assessment"
    assert root.attributes["detective.release.id"] == VERSION
    assert root.attributes["detective.run.id"] == run_id
    assert "gen_ai.agent.name" not in root.attributes  # it would make it an AGENT
    # What a trace viewer lists: an OpenInference CHAIN, the release in, the verdict out.
    assert root.attributes["openinference.span.kind"] == "CHAIN"
    assert root.attributes["input.mime_type"] == "application/json"
    assert json.loads(root.attributes["input.value"])["release_id"] == VERSION
    assert root.attributes["output.mime_type"] == "application/json"
    out = json.loads(root.attributes["output.value"])
    assert (out["run_status"], out["state"]) == ("succeeded", "Filed")
    assert out["verdict"]["severity"] == "low" and out["verdict"]["policy_severity"] == "low"
    assert root.status == "OK"

    # A failed run's root is an error, with no verdict.
    failed_root = next(
        s
        for s in spans
        if s.trace_id == failed_run.trace_id and s.name == "invoke_workflow assessment"
    )
    assert failed_root.status == "ERROR"
    failed_out = json.loads(failed_root.attributes["output.value"])
    assert (failed_out["run_status"], failed_out["state"], failed_out["verdict"]) == (
        "failed",
        "No report: the run failed before the release was read",
        None,
    )

    # The agent: the task in, the final answer out, the session.
    agent = by_name["invoke_agent detective"]
    assert agent.parent_span_id == root.span_id
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["session.id"] == run_id
    assert agent.attributes["gen_ai.conversation.id"] == run_id
    assert parts(agent, "gen_ai.input.messages") == [
        {
            "role": "user",
            "parts": [{"type": "text", "content": f"Assess the risk of release {VERSION}"}],
        }
    ]
    [answer] = parts(agent, "gen_ai.output.messages")
    assert answer["role"] == "assistant" and answer["finish_reason"] == "stop"
    assert answer["parts"][0]["type"] == "text" and answer["parts"][0]["content"]
    # The agent's output is the report the API stored, not what the model said it did.
    assert agent.attributes["openinference.span.kind"] == "AGENT"
    stored = json.loads(agent.attributes["output.value"])
    assert (stored["release_id"], stored["severity"]) == (VERSION, "low")
    assert stored["report_id"]
    assert agent.attributes["gen_ai.usage.input_tokens"] == 1200
    assert agent.attributes["gen_ai.usage.output_tokens"] == 134

    # The model calls: CLIENT spans with tokens and the conversation in parts.
    chats = sorted(
        (span for span in run_trace if span.attributes.get("gen_ai.operation.name") == "chat"),
        key=lambda span: span.attributes["gen_ai.usage.input_tokens"],
    )
    assert [span.kind for span in chats] == ["CLIENT", "CLIENT"]
    assert [span.name for span in chats] == [f"chat {MODEL}"] * 2
    assert [
        (s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"])
        for s in chats
    ] == [(420, 38), (780, 96)]
    first, second = chats
    [instructions] = parts(first, "gen_ai.system_instructions")
    assert instructions["type"] == "text" and "risk" in instructions["content"].lower()
    assert [m["role"] for m in parts(first, "gen_ai.input.messages")] == ["user"]
    [called] = parts(first, "gen_ai.output.messages")
    assert called["finish_reason"] == "tool_call"
    tool_call = next(p for p in called["parts"] if p["type"] == "tool_call")
    assert tool_call["name"] == "get_release_summary"
    assert tool_call["arguments"]["release_id"] == VERSION
    history = parts(second, "gen_ai.input.messages")
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    [response_part] = history[2]["parts"]
    assert response_part["type"] == "tool_call_response"
    assert response_part["id"] == tool_call["id"]
    assert VERSION in response_part["response"]

    # The tools: arguments in, result out.
    summary = by_name["execute_tool get_release_summary"]
    assert summary.attributes["gen_ai.operation.name"] == "execute_tool"
    assert json.loads(summary.attributes["gen_ai.tool.call.arguments"]) == {"release_id": VERSION}
    assert VERSION in summary.attributes["gen_ai.tool.call.result"]
    report = by_name["execute_tool file_risk_report"]
    assert json.loads(report.attributes["gen_ai.tool.call.arguments"])["severity"] == "low"

    # The standard variables: the service, the resource attributes, the headers.
    assert {span.resource["service.name"] for span in spans} == {"detective-otlp-test"}
    assert {span.resource["deployment.environment"] for span in spans} == {"ci"}
    assert all(h.get("x-otlp-key") == "test-key-123" for h in receiver.headers)

    # A secret never leaves: the run's API token is not in any attribute.
    everything = json.dumps([span.attributes for span in spans])
    assert "Bearer " not in everything


async def watch(site: LiveSite, session: str, run_id: str) -> int | None:
    """The run page's websocket, until the server closes it after the run's end."""
    socket = await WebSocket.connect(
        f"{site.ws_url}/ws/runs/{run_id}/", origin=site.url, cookie=f"sessionid={session}"
    )
    await socket.send_text(json.dumps({"last_seq": 0}))
    async with asyncio.timeout(60):
        await socket.listen()
    return socket.close_code


def parts(span: ReceivedSpan, name: str) -> Any:
    return json.loads(span.attributes[name])


def token_sums(receiver: OtlpReceiver) -> dict[str, float]:
    """The token usage histogram's sums by token type, from the worker's latest export
    (exports are cumulative; the web server's have no model calls)."""
    best: dict[str, float] = {}
    for export in receiver.metric_exports:
        sums: dict[str, float] = {}
        for point in export:
            if point.metric == "gen_ai.client.token.usage":
                kind = str(point.attributes.get("gen_ai.token.type"))
                sums[kind] = sums.get(kind, 0) + point.value
        if sums.get("input", 0) >= best.get("input", 0):
            best = sums
    return best
