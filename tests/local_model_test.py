"""The real local model: llama-server with Qwen2.5-Coder-1.5B, as `manage.py local_model
install` leaves them in the data directory. Skipped when they are not installed (CI does not
download 1.1 GB); install them with `uv run manage.py local_model install`.

A server of its own is started for the module on a free loopback port, and stopped after.
"""

from __future__ import annotations

import io
import json
import subprocess
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command

from local_model import serve
from local_model.paths import LocalModelPaths, is_installed
from local_model.spec import INSTALL_HINT, MODEL
from releases.models import AgentEvent, Conversation, Release, RiskReport, RunStatus

PATHS = LocalModelPaths.for_data_dir(settings.CONFIG.data_dir)

pytestmark = pytest.mark.skipif(
    not is_installed(PATHS),
    reason=(
        f"the local model is not installed in {PATHS.root}; install it with "
        f"`{INSTALL_HINT}` (about 1.1 GB and a build of 8 minutes to an hour) to run these tests"
    ),
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_release_summary",
            "description": "Fetch the summary of a release: changes, tests, deployment metrics.",
            "parameters": {
                "type": "object",
                "properties": {"release_id": {"type": "string"}},
                "required": ["release_id"],
            },
        },
    }
]
ASK = [
    {"role": "system", "content": "Call get_release_summary before you answer."},
    {"role": "user", "content": "Assess the risk of release v2.3.0"},
]


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    port = serve.free_port()
    PATHS.logs_dir.mkdir(parents=True, exist_ok=True)
    with PATHS.server_log.open("ab") as log:
        server = subprocess.Popen(
            serve.server_argv(PATHS, port),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        serve.wait_until_healthy(port, alive=lambda: server.poll() is None, log=PATHS.server_log)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def post(port: int, path: str, body: dict[str, object]) -> dict[str, object]:
    response = httpx.post(f"http://127.0.0.1:{port}{path}", json=body, timeout=300)
    response.raise_for_status()
    data = response.json()
    assert isinstance(data, dict)
    return data


def test_the_server_renders_past_tool_calls_with_our_template(port: int) -> None:
    rendered = post(
        port,
        "/apply-template",
        {
            "messages": [
                *ASK,
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "get_release_summary",
                                "arguments": json.dumps({"release_id": "v2.3.0"}),
                            },
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": '{"version": "v2.3.0"}'},
            ],
            "tools": TOOLS,
        },
    )["prompt"]

    assert isinstance(rendered, str)
    assert "write a fenced ```json block" in rendered
    assert (
        '<|im_start|>assistant\n```json\n{"name": "get_release_summary", "arguments": '
        '{"release_id": "v2.3.0"}}\n```<|im_end|>'
    ) in rendered
    assert '<tool_response>\n{"version": "v2.3.0"}\n</tool_response>' in rendered


def test_tool_calls_come_back_as_tool_calls_on_the_openai_api(port: int) -> None:
    reply = post(
        port,
        "/v1/chat/completions",
        {"model": MODEL.alias, "messages": ASK, "tools": TOOLS, "temperature": 0},
    )

    choice = reply["choices"][0]  # type: ignore[index]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_release_summary"
    assert json.loads(call["function"]["arguments"]) == {"release_id": "v2.3.0"}
    assert "```" not in (choice["message"]["content"] or "")


def test_tool_calls_come_back_as_tool_use_on_the_anthropic_api(port: int) -> None:
    reply = post(
        port,
        "/v1/messages",
        {
            "model": MODEL.alias,
            "max_tokens": 200,
            "temperature": 0,
            "system": ASK[0]["content"],
            "messages": ASK[1:],
            "tools": [
                {
                    "name": tool["function"]["name"],  # type: ignore[index]
                    "description": tool["function"]["description"],  # type: ignore[index]
                    "input_schema": tool["function"]["parameters"],  # type: ignore[index]
                }
                for tool in TOOLS
            ],
        },
    )

    assert reply["stop_reason"] == "tool_use"
    (use,) = [block for block in reply["content"] if block["type"] == "tool_use"]  # type: ignore[union-attr,index]
    assert use["name"] == "get_release_summary"
    assert use["input"] == {"release_id": "v2.3.0"}


@pytest.mark.django_db(transaction=True)
def test_a_full_assessment_runs_on_the_local_model(
    port: int, make_release: Callable[..., Release]
) -> None:
    release = make_release(
        "v2.4.0",
        changes=["Switch search service to the new cluster", "Tune cache expiry"],
        test_results={"passed": 188, "failed": 0, "skipped": 2},
        deployment_metrics={"error_rate": 0.12, "response_time_p95": 950},
    )
    out = io.StringIO()
    started = time.monotonic()

    call_command(
        "assess",
        release.version,
        "--provider=local",
        f"--model={MODEL.alias}",
        f"--base-url={serve.base_url(port)}",
        stdout=out,
    )

    elapsed = time.monotonic() - started
    run = Conversation.objects.get(release=release)
    assert run.status == RunStatus.SUCCEEDED, out.getvalue()
    # The summary first, then exactly one report, which ends the run.
    calls = [
        event.payload["tool_call"]["name"]
        for event in AgentEvent.objects.filter(conversation=run, kind="tool_call").order_by("seq")
    ]
    assert calls[0] == "get_release_summary"
    assert calls[-1] == "file_risk_report"
    assert calls.count("file_risk_report") == 1
    report = RiskReport.objects.get(conversation=run)
    assert report.severity in {"high", "medium", "low"}
    assert report.findings
    assert f"risk · {release.version}" in out.getvalue()
    print(f"assessment on the local model: {elapsed:.1f} s, {report.severity}, {report.findings}")
