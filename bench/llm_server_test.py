from __future__ import annotations

import time

import httpx
import pytest

from agent.messages import Message, ToolCall, ToolResult
from agent.providers.openai_compat import OpenAICompatProvider
from agent.providers.protocol import ModelRequest, StreamEnd, StreamTextDelta
from bench.llm_server import (
    FINAL,
    OPENING,
    LoopbackServer,
    release_of,
    timestamps_in,
    turn_for,
)
from bench.procs import model_server


def test_the_script_follows_the_conversation() -> None:
    user = {"role": "user", "content": "Assess the risk of release v3.4.5."}
    first = turn_for([user])
    assert [c.name for c in first.message.tool_calls] == ["get_release_summary"]
    assert first.message.tool_calls[0].arguments == {"release_id": "v3.4.5"}
    tool = {"role": "tool", "tool_call_id": "call_summary", "content": "{}"}
    second = turn_for([user, tool])
    assert second.message.tool_calls[0].name == "file_risk_report"
    assert second.message.tool_calls[0].arguments["release_id"] == "v3.4.5"
    third = turn_for([user, tool, tool])
    assert (third.message.content, third.message.tool_calls) == (FINAL, [])
    assert release_of([{"role": "user", "content": "no version here"}]) == "v2.1.0"


def test_only_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"):
        LoopbackServer(host="0.0.0.0")


def history(results: int) -> list[Message]:
    messages = [Message.user("Assess the risk of release v9.9.9")]
    for index in range(results):
        call = ToolCall(id=f"c{index}", name="get_release_summary", arguments={})
        messages.append(Message.assistant("", [call]))
        result = ToolResult(tool_call_id=call.id, name=call.name, content="{}", success=True)
        messages.append(Message.tool(result))
    return messages


async def test_the_real_adapter_understands_it_plain_and_streaming() -> None:
    async with LoopbackServer() as server, httpx.AsyncClient() as client:
        provider = OpenAICompatProvider("m", f"{server.url}/v1", "key", client=client)
        request = ModelRequest(system="s", messages=history(0))
        plain = await provider.complete(request)
        assert plain.message.tool_calls[0].arguments == {"release_id": "v9.9.9"}
        assert plain.usage.input_tokens == 812

        events = [e async for e in provider.stream(ModelRequest(system="s", messages=history(1)))]
        text = "".join(e.text for e in events if isinstance(e, StreamTextDelta))
        end = events[-1]
        assert isinstance(end, StreamEnd)
        assert text == end.response.message.content
        assert end.response.message.tool_calls[0].name == "file_risk_report"
        assert server.calls == 2


async def test_the_release_api() -> None:
    async with LoopbackServer() as server, httpx.AsyncClient(base_url=server.url) as client:
        summary = await client.get("/api/releases/v1.0.0/summary")
        assert summary.json()["version"] == "v1.0.0"
        report = await client.post("/api/risk-reports", json={"release_id": "v1.0.0"})
        assert (report.status_code, report.json()["id"]) == (201, "rep_1")
        assert (await client.get("/nowhere")).status_code == 404
        assert server.api_calls == 3


async def test_latency_and_drip_prefixes() -> None:
    async with LoopbackServer() as server, httpx.AsyncClient() as client:
        slow = OpenAICompatProvider("m", f"{server.url}/latency/50/v1", "key", client=client)
        started = time.monotonic()
        await slow.complete(ModelRequest(messages=history(0)))
        assert time.monotonic() - started >= 0.05

        drip = OpenAICompatProvider("m", f"{server.url}/drip/1/v1", "key", client=client)
        before = time.monotonic_ns()
        events = [e async for e in drip.stream(ModelRequest(messages=history(0)))]
        stamps = timestamps_in("".join(e.text for e in events if isinstance(e, StreamTextDelta)))
        assert len(stamps) == OPENING.count(" ") + 1
        assert before <= stamps[0] <= stamps[-1] <= time.monotonic_ns()
        end = events[-1]
        assert isinstance(end, StreamEnd)
        assert end.response.message.tool_calls[0].name == "get_release_summary"


def test_the_server_runs_as_its_own_process() -> None:
    with model_server() as url:
        response = httpx.get(f"{url}/api/releases/v1/summary", timeout=5)
        assert response.json()["version"] == "v1"
