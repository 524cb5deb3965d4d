"""End to end: a full assessment (the summary, then the report) through each adapter.

Everything below the HTTP level is real: build_agent's composition, the adapter parsing
its provider's streaming wire format, retry and tracing wrappers, the tool registry and
the release tools, the context manager, the JSON-file store and the trace file exporter.
respx plays the model (scripted in each provider's format, `agent.testing.wire`) and the
release API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import respx

from agent.config import AgentSettings, build_agent
from agent.store import JsonFileStore
from agent.telemetry.file_exporter import read_trace
from agent.telemetry.setup import (
    Telemetry,
    TelemetryConfig,
    configure_telemetry,
    shutdown_telemetry,
)
from agent.testing.fakes import call, reply
from agent.testing.wire import ANTHROPIC_MODEL, OLLAMA_MODEL, OPENAI_MODEL, mount

API = "http://release-api.test"
RELEASE = "v2.1.0"
SUMMARY = {
    "version": RELEASE,
    "changes": ["Added payment processing", "Fixed authentication bug"],
    "tests": {"passed": 142, "failed": 2, "skipped": 5},
    "deployment_metrics": {"error_rate": 0.06, "response_time_p95": 450},
}
FINDINGS = ["2 failed tests alongside new payment processing", "error_rate 0.06 (6%)"]

ADAPTERS: dict[str, dict[str, Any]] = {
    "anthropic": {
        "settings": {"anthropic_api_key": "sk-ant-test-key-123456"},
        "base_url": "http://anthropic.test",
        "model": ANTHROPIC_MODEL,
    },
    "openai": {
        "settings": {"openai_api_key": "sk-openai-test-key-123456"},
        "base_url": "http://openai.test/v1",
        "model": OPENAI_MODEL,
    },
    "ollama": {"settings": {}, "base_url": "http://ollama.test", "model": OLLAMA_MODEL},
}


def script() -> list:
    return [
        reply(
            "I'll fetch the release summary first.",
            call("get_release_summary", "call_summary", release_id=RELEASE),
            input_tokens=812,
            output_tokens=31,
        ),
        reply(
            "The error rate of 6% and failing tests make this high risk.",
            call(
                "file_risk_report",
                "call_report",
                release_id=RELEASE,
                severity="high",
                findings=FINDINGS,
                summary="Error rate above 5% with failing tests.",
            ),
            input_tokens=1204,
            output_tokens=88,
        ),
    ]


@pytest.fixture
def telemetry(tmp_path: Path) -> Iterator[Telemetry]:
    shutdown_telemetry()
    handles = configure_telemetry(
        TelemetryConfig(data_dir=tmp_path, otlp_endpoint=None, capture_content=False),
        set_global=False,
    )
    yield handles
    shutdown_telemetry()


@pytest.mark.parametrize("kind", list(ADAPTERS))
async def test_full_assessment_through_each_adapter(
    kind: str, tmp_path: Path, telemetry: Telemetry
) -> None:
    adapter = ADAPTERS[kind]
    settings = AgentSettings(
        provider=kind,
        model=adapter["model"],
        base_url=adapter["base_url"],
        api_url=API,
        api_token="release-api-token",
        data_dir=tmp_path,
        **adapter["settings"],
    )
    store = JsonFileStore(settings.conversations_dir)

    with respx.mock(assert_all_called=True) as router:
        model = mount(router, kind, adapter["base_url"], script(), model=adapter["model"])
        summary_route = router.get(f"{API}/api/releases/{RELEASE}/summary").respond(json=SUMMARY)
        report_route = router.post(f"{API}/api/risk-reports").respond(
            201, json={"id": "rep_42", "status": "filed"}
        )
        agent = build_agent(settings, release_id=RELEASE, store=store)
        events = [e async for e in agent.send_message(f"Assess the risk of release {RELEASE}")]
        await agent.aclose()

    # The events, in order.
    kinds = [e.kind for e in events if e.kind != "text_delta"]
    assert kinds == [
        "run_started",
        "model_request_started",
        "model_responded",
        "usage",
        "tool_call",
        "tool_result",
        "model_request_started",
        "model_responded",
        "usage",
        "tool_call",
        "tool_result",
        "report_filed",
        "run_finished",
    ]
    streamed = "".join(e.text for e in events if e.kind == "text_delta")
    assert streamed == (
        "I'll fetch the release summary first."
        "The error rate of 6% and failing tests make this high risk."
    )
    results = [e.result for e in events if e.kind == "tool_result"]
    assert all(result.success for result in results)
    assert json.loads(results[0].content) == SUMMARY
    report = next(e for e in events if e.kind == "report_filed")
    assert (report.release_id, report.severity, report.report_id) == (RELEASE, "high", "rep_42")
    assert report.findings == FINDINGS
    finished = events[-1]
    assert finished.reason == "report_filed"
    assert (finished.usage.input_tokens, finished.usage.output_tokens) == (2016, 119)

    # The release API saw the token and the trace context, and got the report.
    summary_request = summary_route.calls.last.request
    assert summary_request.headers["authorization"] == "Bearer release-api-token"
    assert summary_request.headers["traceparent"].startswith("00-")
    assert json.loads(report_route.calls.last.request.content) == {
        "release_id": RELEASE,
        "severity": "high",
        "findings": FINDINGS,
        "summary": "Error rate above 5% with failing tests.",
    }

    # The model got the tool result back in its own format, right after its call.
    assert len(model.requests) == 2
    assert model.requests[0]["stream"] is True
    assert_tool_result_sent(kind, model.requests[1])

    # The conversation and its session log were saved, and read back the same.
    conversation_id = agent.conversation.id
    saved = JsonFileStore(settings.conversations_dir).load(conversation_id)
    assert [m.role for m in saved.messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert saved.messages[2].tool_call_id == saved.messages[1].tool_calls[0].id
    assert saved.metadata["release_id"] == RELEASE
    assert saved.metadata["usage"]["input_tokens"] == 2016
    trace_id = saved.metadata["trace_id"]
    log = (settings.conversations_dir / f"{conversation_id}.events.jsonl").read_text()
    assert len(log.splitlines()) == len(events)

    # One trace file for the conversation, with the GenAI attributes.
    telemetry.force_flush()
    spans = read_trace(tmp_path / "traces", trace_id)
    assert (tmp_path / "traces" / f"trace_{trace_id}.json").exists()
    by_operation: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        operation = span["attributes"].get("gen_ai.operation.name")
        by_operation.setdefault(operation, []).append(span["attributes"])
    (agent_span,) = by_operation["invoke_agent"]
    assert agent_span["gen_ai.conversation.id"] == conversation_id
    chats = by_operation["chat"]
    assert len(chats) == 2
    for chat in chats:
        assert chat["gen_ai.request.model"] == adapter["model"]
        assert chat["gen_ai.provider.name"]
    assert [c["gen_ai.usage.input_tokens"] for c in chats] == [812, 1204]
    assert [c["gen_ai.usage.output_tokens"] for c in chats] == [31, 88]
    tools = by_operation["execute_tool"]
    assert [t["gen_ai.tool.name"] for t in tools] == ["get_release_summary", "file_risk_report"]
    assert all(t["gen_ai.tool.call.id"] for t in tools)
    secrets = [*adapter["settings"].values(), "release-api-token"]
    trace_text = (tmp_path / "traces" / f"trace_{trace_id}.json").read_text()
    for secret in secrets:
        assert secret not in trace_text
        assert secret not in log


def assert_tool_result_sent(kind: str, body: dict[str, Any]) -> None:
    messages = body["messages"]
    if kind == "anthropic":
        assistant, result = messages[-2], messages[-1]
        assert assistant["role"] == "assistant"
        tool_use = next(b for b in assistant["content"] if b["type"] == "tool_use")
        assert result["role"] == "user"
        block = next(b for b in result["content"] if b["type"] == "tool_result")
        assert block["tool_use_id"] == tool_use["id"] == "call_summary"
    elif kind == "openai":
        assistant, result = messages[-2], messages[-1]
        assert assistant["tool_calls"][0]["id"] == "call_summary"
        assert result == {
            "role": "tool",
            "tool_call_id": "call_summary",
            "content": result["content"],
        }
        assert json.loads(result["content"]) == SUMMARY
    else:
        assistant, result = messages[-2], messages[-1]
        assert assistant["tool_calls"][0]["function"]["name"] == "get_release_summary"
        assert result["role"] == "tool"
        assert json.loads(result["content"]) == SUMMARY
        assert body["options"]["num_ctx"] > 2048
