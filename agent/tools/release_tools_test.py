from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import respx

from agent.messages import ToolCall
from agent.tools.registry import ToolRegistry
from agent.tools.release_tools import (
    NO_REPORT_FILED,
    NO_REPORT_WITHOUT_SUMMARY,
    ReleaseTools,
    register_release_tools,
)

BASE = "http://releases.test"
TOKEN = "tok_live_0123456789abcdef"
SUMMARY = {
    "version": "v2.1.0",
    "changes": ["Added payment processing"],
    "tests": {"passed": 142, "failed": 2, "skipped": 5},
    "deployment_metrics": {"error_rate": 0.02, "response_time_p95": 450},
}
SUMMARY_URL = f"{BASE}/api/releases/v2.1.0/summary"
REPORTS_URL = f"{BASE}/api/risk-reports"


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        yield router


@pytest.fixture
async def tools() -> AsyncIterator[ReleaseTools]:
    async with ReleaseTools(
        BASE + "/",
        token=TOKEN,
        release_id="v2.1.0",
        extra_headers=lambda: {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"},
        summary_retry_delay_s=0,
        reconnect=False,  # a refused connection fails at once here (reconnecting: below)
    ) as release_tools:
        yield release_tools


@pytest.fixture
async def assessing(api: respx.MockRouter, tools: ReleaseTools) -> ReleaseTools:
    """The tools of an assessment that has read its release's summary, as filing needs."""
    api.get(SUMMARY_URL).respond(200, json={"version": "v2.1.0"})
    assert (await tools.get_release_summary("v2.1.0")).success
    return tools


def report(**overrides: Any) -> dict[str, Any]:
    return {
        "release_id": "v2.1.0",
        "severity": "high",
        "findings": ["2 payment tests failing"],
        "summary": "Failing tests in payments.",
        **overrides,
    }


# -- get_release_summary -------------------------------------------------------------------


async def test_the_summary_is_fetched_with_auth_and_trace_headers(
    api: respx.MockRouter, tools: ReleaseTools
) -> None:
    route = api.get(SUMMARY_URL).respond(200, json=SUMMARY)
    outcome = await tools.get_release_summary("v2.1.0")
    assert outcome.success
    assert json.loads(outcome.content) == SUMMARY
    assert outcome.data == SUMMARY
    request = route.calls.last.request
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["Accept"] == "application/json"
    assert request.headers["traceparent"].startswith("00-aaaa")


async def test_the_brief_view_is_asked_for_when_the_profile_wants_it(
    api: respx.MockRouter,
) -> None:
    route = api.get(SUMMARY_URL, params={"view": "brief"}).respond(200, json=SUMMARY)
    async with ReleaseTools(BASE, token=TOKEN, brief_summary=True) as brief:
        outcome = await brief.get_release_summary("v2.1.0")
    assert json.loads(outcome.content) == SUMMARY
    assert "\n" not in outcome.content  # compact: indentation is prompt to process
    assert route.calls.last.request.url.params["view"] == "brief"


async def test_a_brief_filing_cites_the_evidence_by_key_and_files_the_sentences(
    api: respx.MockRouter,
) -> None:
    evidence = {"E1": "Error rate 9 %, above the 5 % limit for high", "E2": "1 change in auth"}
    api.get(SUMMARY_URL).respond(
        200, json={**SUMMARY, "policy": {"severity_floor": "high", "evidence": evidence}}
    )
    route = api.post(REPORTS_URL).respond(201, json={"report_id": "r1"})
    async with ReleaseTools(
        BASE, token=TOKEN, release_id="v2.1.0", with_summary=False, brief_summary=True
    ) as brief:
        assert (await brief.get_release_summary("v2.1.0")).success
        outcome = await brief.file_risk_report_brief(
            "v2.1.0", "high", evidence=["E1", "e2.", "The p95 is 450 ms"]
        )
    assert outcome.success
    filed = json.loads(route.calls.last.request.content)
    assert filed["findings"] == [evidence["E1"], evidence["E2"], "The p95 is 450 ms"]
    assert outcome.data["findings"] == filed["findings"]


async def test_a_brief_filing_with_an_empty_item_is_refused_with_the_keys_without_a_request(
    api: respx.MockRouter,
) -> None:
    evidence = {"E1": "Error rate 9 %, above the 5 % limit for high", "E2": "1 change in auth"}
    api.get(SUMMARY_URL).respond(
        200, json={**SUMMARY, "policy": {"severity_floor": "high", "evidence": evidence}}
    )
    route = api.post(REPORTS_URL).respond(201, json={"report_id": "r1"})
    async with ReleaseTools(
        BASE, token=TOKEN, release_id="v2.1.0", with_summary=False, brief_summary=True
    ) as brief:
        assert (await brief.get_release_summary("v2.1.0")).success
        outcome = await brief.file_risk_report_brief("v2.1.0", "high", evidence=["E1", "  "])
    assert not outcome.success and not route.called
    assert "evidence item 2 is empty" in outcome.content
    assert "each once: E1, E2" in outcome.content


async def test_a_summary_that_is_not_an_object_is_still_passed_on(
    api: respx.MockRouter, tools: ReleaseTools
) -> None:
    api.get(SUMMARY_URL).respond(200, json=["odd"])
    outcome = await tools.get_release_summary("v2.1.0")
    assert (outcome.success, outcome.data) == (True, {"summary": ["odd"]})


async def test_an_unknown_release_is_reported_as_not_existing(
    api: respx.MockRouter, tools: ReleaseTools
) -> None:
    api.get(f"{BASE}/api/releases/v9.9.9/summary").respond(404, json={"detail": "Not found"})
    outcome = await tools.get_release_summary("v9.9.9")
    assert (outcome.success, outcome.error_type) == (False, "InvalidArgumentsError")
    assert "Release 'v9.9.9' does not exist" in outcome.content
    assert "404 Not Found" in outcome.content
    # Another release than the one assessed: a mistyped id the model may still correct.
    assert not outcome.terminal
    assert outcome.content.endswith(NO_REPORT_WITHOUT_SUMMARY)


@pytest.mark.parametrize(
    ("response", "explanation", "asked"),
    [
        (httpx.Response(500, text="Internal error"), "answered 500 Internal Server Error", 2),
        (httpx.Response(503), "answered 503 Service Unavailable", 2),
        (httpx.Response(403, text="forbidden"), "answered 403 Forbidden", 1),
        (httpx.Response(200, text="<html>oops</html>"), "not valid JSON", 1),
        (httpx.ReadTimeout("slow"), "did not answer within 10 seconds", 2),
        (httpx.ConnectError("refused"), "could not be reached (ConnectError)", 2),
    ],
)
async def test_an_unavailable_summary_is_said_plainly_and_ends_the_run(
    api: respx.MockRouter, tools: ReleaseTools, response: Any, explanation: str, asked: int
) -> None:
    if isinstance(response, Exception):
        route = api.get(SUMMARY_URL).mock(side_effect=response)
    else:
        route = api.get(SUMMARY_URL).mock(return_value=response)
    outcome = await tools.get_release_summary("v2.1.0")
    assert (outcome.success, outcome.error_type) == (False, "ToolExecutionError")
    assert outcome.content.startswith("The summary of release 'v2.1.0' is unavailable")
    assert explanation in outcome.content
    # Without its data there is nothing to assess: the run ends, this message its answer.
    assert outcome.terminal
    assert outcome.content.endswith("." + NO_REPORT_FILED)
    assert route.call_count == asked  # a blip of the API (5xx, no answer) is asked again


async def test_a_blip_of_the_api_is_ridden_out_by_asking_again(
    api: respx.MockRouter, tools: ReleaseTools
) -> None:
    api.get(SUMMARY_URL).mock(side_effect=[httpx.Response(502), httpx.Response(200, json=SUMMARY)])
    outcome = await tools.get_release_summary("v2.1.0")
    assert (outcome.success, outcome.terminal) == (True, False)


async def test_the_assessed_release_missing_ends_the_run_at_once(
    api: respx.MockRouter, tools: ReleaseTools
) -> None:
    route = api.get(SUMMARY_URL).respond(404)
    outcome = await tools.get_release_summary("v2.1.0")
    assert (outcome.success, outcome.terminal, route.call_count) == (False, True, 1)
    assert outcome.content == (
        "Release 'v2.1.0' does not exist (the release API answered 404 Not Found). Check the "
        "release id." + NO_REPORT_FILED
    )


async def test_a_server_that_never_answers_is_given_up_on(api: respx.MockRouter) -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    api.get(SUMMARY_URL).mock(side_effect=hang)
    async with ReleaseTools(BASE, timeout_s=0.01) as release_tools:
        outcome = await release_tools.get_release_summary("v2.1.0")
    assert "did not answer within 0.01 seconds" in outcome.content


@pytest.mark.parametrize(
    ("release_id", "path"),
    [
        ("../admin", "/api/releases/..%2Fadmin/summary"),
        ("..", "/api/releases/%2E%2E/summary"),
        ("v1 beta", "/api/releases/v1%20beta/summary"),
    ],
)
async def test_a_release_id_is_one_path_segment(
    api: respx.MockRouter, tools: ReleaseTools, release_id: str, path: str
) -> None:
    route = api.route(method="GET").respond(404)
    await tools.get_release_summary(release_id)
    assert route.calls.last.request.url.raw_path.decode() == path


# -- file_risk_report ----------------------------------------------------------------------


async def test_filing_posts_the_report_and_ends_the_run(
    api: respx.MockRouter, assessing: ReleaseTools
) -> None:
    route = api.post(REPORTS_URL).respond(201, json={"report_id": "rpt_1", "status": "filed"})
    outcome = await assessing.file_risk_report(**report())
    assert json.loads(route.calls.last.request.content) == report()
    assert route.calls.last.request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert (outcome.success, outcome.terminal) == (True, True)
    assert outcome.data == {"report_id": "rpt_1", **report()}
    assert "rpt_1" in outcome.content and "complete" in outcome.content


@pytest.mark.parametrize(
    ("response", "report_id"),
    [
        (httpx.Response(200, json={"id": 7}), "7"),
        (httpx.Response(201, text="created"), None),
        (httpx.Response(201, json=["rpt"]), None),
    ],
)
async def test_the_report_id_is_read_where_the_api_puts_it(
    api: respx.MockRouter, assessing: ReleaseTools, response: httpx.Response, report_id: str | None
) -> None:
    api.post(REPORTS_URL).mock(return_value=response)
    outcome = await assessing.file_risk_report(**report())
    assert outcome.terminal
    assert outcome.data is not None and outcome.data["report_id"] == report_id


async def test_filing_for_another_release_is_refused_without_a_request(
    api: respx.MockRouter, tools: ReleaseTools
) -> None:
    route = api.post(REPORTS_URL).respond(201, json={"report_id": "rpt_1"})
    outcome = await tools.file_risk_report(**report(release_id="v1.0.0"))
    assert (outcome.success, outcome.terminal, outcome.error_type) == (
        False,
        False,
        "InvalidArgumentsError",
    )
    assert "this assessment is for release 'v2.1.0'" in outcome.content
    assert not route.called


async def test_a_second_filing_for_the_same_assessment_is_refused(
    api: respx.MockRouter, assessing: ReleaseTools
) -> None:
    route = api.post(REPORTS_URL).respond(201, json={"report_id": "rpt_1"})
    await assessing.file_risk_report(**report())
    again = await assessing.file_risk_report(**report(severity="low"))
    assert (again.success, again.terminal) == (False, False)
    assert "rpt_1" in again.content and "already been filed" in again.content
    assert route.call_count == 1


async def test_filing_before_the_summary_was_read_is_refused_without_a_request(
    api: respx.MockRouter, tools: ReleaseTools
) -> None:
    route = api.post(REPORTS_URL).respond(201, json={"report_id": "rpt_1"})
    outcome = await tools.file_risk_report(**report())
    assert (outcome.success, outcome.terminal) == (False, False)
    assert "has not been read in this assessment" in outcome.content
    assert "call get_release_summary first" in outcome.content.lower()
    assert not route.called


async def test_filing_after_the_summary_failed_is_refused_and_says_why(
    api: respx.MockRouter, tools: ReleaseTools
) -> None:
    api.get(SUMMARY_URL).respond(500, text="Internal Server Error")
    route = api.post(REPORTS_URL).respond(201, json={"report_id": "rpt_1"})
    assert not (await tools.get_release_summary("v2.1.0")).success
    outcome = await tools.file_risk_report(**report(severity="low"))
    assert not outcome.success and not route.called
    assert "it failed:" in outcome.content and "500" in outcome.content
    assert "file no report" in outcome.content

    # Read at last (the API recovered): now it may file.
    api.get(SUMMARY_URL).respond(200, json={"version": "v2.1.0"})
    assert (await tools.get_release_summary("v2.1.0")).success
    assert (await tools.file_risk_report(**report())).terminal


async def test_without_a_release_under_assessment_any_release_may_be_filed(
    api: respx.MockRouter,
) -> None:
    route = api.post(REPORTS_URL).respond(201, json={"report_id": "r"})
    async with ReleaseTools(BASE) as release_tools:
        first = await release_tools.file_risk_report(**report(release_id="a"))
        second = await release_tools.file_risk_report(**report(release_id="a"))
    assert first.terminal and second.terminal
    assert "Authorization" not in route.calls.last.request.headers


@pytest.mark.parametrize(
    ("response", "error_type", "explanation"),
    [
        (httpx.Response(404), "InvalidArgumentsError", "does not exist"),
        (
            httpx.Response(400, json={"findings": ["must not be empty"]}),
            "InvalidArgumentsError",
            'rejected the report (400 Bad Request). It said: {"findings"',
        ),
        (
            httpx.Response(422, json={"error": "Refused: severity low is below the policy's"}),
            "InvalidArgumentsError",
            "Refused: severity low is below the policy's",
        ),
        (httpx.Response(422, text="not json"), "InvalidArgumentsError", "refused the report"),
        (httpx.Response(400, text=""), "InvalidArgumentsError", "rejected the report (400"),
        (httpx.Response(409, text="x" * 1000), "ToolExecutionError", "was not filed"),
        (httpx.Response(503), "ToolExecutionError", "answered 503 Service Unavailable"),
        (httpx.ReadTimeout("slow"), "ToolExecutionError", "unknown whether it reached"),
        (httpx.ConnectError("refused"), "ToolExecutionError", "could not be reached"),
    ],
)
async def test_a_failed_filing_is_explained_and_does_not_end_the_run(
    api: respx.MockRouter,
    assessing: ReleaseTools,
    response: Any,
    error_type: str,
    explanation: str,
) -> None:
    if isinstance(response, Exception):
        api.post(REPORTS_URL).mock(side_effect=response)
    else:
        api.post(REPORTS_URL).mock(return_value=response)
    outcome = await assessing.file_risk_report(**report())
    assert (outcome.success, outcome.terminal, outcome.error_type) == (False, False, error_type)
    assert explanation in outcome.content
    assert len(outcome.content) < 600


# -- through the registry ------------------------------------------------------------------


@pytest.fixture
async def registry(api: respx.MockRouter) -> AsyncIterator[ToolRegistry]:
    registry = ToolRegistry()
    release_tools = register_release_tools(
        registry, BASE, token=TOKEN, release_id="v2.1.0", timeout_s=4.0
    )
    yield registry
    await release_tools.aclose()


def test_both_tools_are_registered_with_model_facing_descriptions(
    registry: ToolRegistry,
) -> None:
    tools = {t.name: t for t in registry.get_tools()}
    assert list(tools) == ["get_release_summary", "file_risk_report"]
    assert "Call this first" in tools["get_release_summary"].description
    assert "severity guidelines in your system prompt" in tools["file_risk_report"].description
    assert "ends the assessment" in tools["file_risk_report"].description
    report_schema = tools["file_risk_report"].parameters
    assert report_schema["properties"]["severity"]["enum"] == ["high", "medium", "low"]
    assert report_schema["properties"]["findings"]["minItems"] == 1
    assert report_schema["required"] == ["release_id", "severity", "findings"]
    # Our own HTTP deadlines fire first (the summary may ask twice, 4 s each, 0.5 s apart);
    # the registry's is the backstop.
    assert registry._tools["file_risk_report"].timeout_s == 2 * 4.0 + 0.5 + 5.0


@pytest.mark.parametrize(
    "arguments",
    [
        {"release_id": "v2.1.0", "severity": "critical", "findings": ["x"]},
        {"release_id": "v2.1.0", "severity": "high", "findings": []},
        {"release_id": "v2.1.0", "severity": "high"},
    ],
)
async def test_invalid_reports_never_reach_the_api(
    api: respx.MockRouter, registry: ToolRegistry, arguments: dict[str, Any]
) -> None:
    route = api.post(REPORTS_URL).respond(201)
    result = await registry.execute(ToolCall(id="c", name="file_risk_report", arguments=arguments))
    assert (result.success, result.error_type) == (False, "InvalidArgumentsError")
    assert not route.called


async def test_a_filed_report_is_a_terminal_result(
    api: respx.MockRouter, registry: ToolRegistry
) -> None:
    api.get(SUMMARY_URL).respond(200, json={"version": "v2.1.0"})
    api.post(REPORTS_URL).respond(201, json={"report_id": "rpt_9"})
    lookup = ToolCall(id="s", name="get_release_summary", arguments={"release_id": "v2.1.0"})
    assert (await registry.execute(lookup)).success
    result = await registry.execute(
        ToolCall(id="c", name="file_risk_report", arguments=report(summary=""))
    )
    assert (result.success, result.terminal) == (True, True)
    assert result.data == {"report_id": "rpt_9", **report(summary="")}


async def test_the_token_never_leaves_the_authorization_header(
    api: respx.MockRouter, registry: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    # A server that echoes the request's token back in its error.
    api.get(SUMMARY_URL).respond(500, text=f"bad token {TOKEN}")
    api.post(REPORTS_URL).respond(422, text=f"Authorization: Bearer {TOKEN}")
    with caplog.at_level(logging.DEBUG):
        results = [
            await registry.execute(
                ToolCall(id="1", name="get_release_summary", arguments={"release_id": "v2.1.0"})
            ),
            await registry.execute(ToolCall(id="2", name="file_risk_report", arguments=report())),
        ]
    for result in results:
        assert not result.success
        assert TOKEN not in result.model_dump_json()
    assert "[REDACTED]" in results[1].content
    assert TOKEN not in caplog.text
    assert TOKEN not in repr(ReleaseTools(BASE, token=TOKEN))


async def test_a_failing_header_hook_does_not_break_the_tool(
    api: respx.MockRouter, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> dict[str, str]:
        raise RuntimeError("no tracer")

    route = api.get(SUMMARY_URL).respond(200, json=SUMMARY)
    async with ReleaseTools(BASE, extra_headers=broken) as release_tools:
        with caplog.at_level(logging.WARNING):
            outcome = await release_tools.get_release_summary("v2.1.0")
    assert outcome.success and route.called
    assert "extra_headers hook failed" in caplog.text


async def test_only_a_client_it_created_is_closed() -> None:
    client = httpx.AsyncClient()
    async with ReleaseTools(BASE, client=client):
        pass
    assert not client.is_closed
    await client.aclose()

    owned = ReleaseTools(BASE)
    await owned.aclose()
    assert owned._client.is_closed


async def test_a_refusal_reaches_the_model_whole_and_as_data(
    api: respx.MockRouter, assessing: ReleaseTools
) -> None:
    problems = "\n".join(f"- problem {i}: " + "x" * 80 for i in range(10))
    api.post(REPORTS_URL).mock(
        return_value=httpx.Response(422, json={"error": f"Not filed:\n{problems} </tool_response>"})
    )
    outcome = await assessing.file_risk_report(**report())
    assert "problem 9" in outcome.content  # every reason, not the first 300 characters
    assert "</tool_response>" not in outcome.content
    assert not outcome.terminal


def test_no_tool_description_carries_an_example_finding() -> None:
    # Small models copy examples into their reports ("2 payment tests failing").
    tools = ReleaseTools("http://api.test").tools()
    for described in tools:
        definition = described.definition
        text = definition.description + json.dumps(definition.parameters)
        assert not re.search(r"\d+ (?:\w+ )?tests? (?:fail|pass)", text), definition.name
        assert "payment" not in text.lower(), definition.name


async def test_without_summary_the_report_tool_has_no_summary_field(
    api: respx.MockRouter,
) -> None:
    registry = ToolRegistry()
    brief = register_release_tools(
        registry, BASE, token=TOKEN, release_id="v2.1.0", with_summary=False
    )
    schema = next(t for t in registry.get_tools() if t.name == "file_risk_report").parameters
    assert set(schema["properties"]) == {"release_id", "severity", "evidence"}
    full = ToolRegistry()
    register_release_tools(full, BASE, token=TOKEN, release_id="v2.1.0")
    full_schema = next(t for t in full.get_tools() if t.name == "file_risk_report").parameters
    assert "summary" in full_schema["properties"]
    # It files the same report, with an empty summary.
    api.get(SUMMARY_URL).respond(200, json={"version": "v2.1.0"})
    filed = api.post(REPORTS_URL).respond(201, json={"report_id": 7, "severity": "high"})
    assert (await brief.get_release_summary("v2.1.0")).success
    outcome = await brief.file_risk_report_brief("v2.1.0", "high", ["2 tests failing"])
    assert outcome.success
    assert json.loads(filed.calls.last.request.content)["summary"] == ""
    await brief.aclose()


async def test_a_refused_connection_is_tried_again_until_the_api_is_back(
    api: respx.MockRouter,
) -> None:
    # The web server restarting under `up`: refused twice, then it answers.
    route = api.get(SUMMARY_URL).mock(
        side_effect=[
            httpx.ConnectError("refused"),
            httpx.ConnectError("refused"),
            httpx.Response(200, json={"version": "v2.1.0"}),
        ]
    )
    async with ReleaseTools(BASE, token=TOKEN, release_id="v2.1.0") as release_tools:
        outcome = await release_tools.get_release_summary("v2.1.0")
    assert outcome.success
    assert route.call_count == 3


async def test_a_connection_refused_past_the_deadline_says_so(api: respx.MockRouter) -> None:
    api.get(SUMMARY_URL).mock(side_effect=httpx.ConnectError("refused"))
    async with ReleaseTools(
        BASE, release_id="v2.1.0", timeout_s=0.3, summary_retry_delay_s=0
    ) as release_tools:
        outcome = await release_tools.get_release_summary("v2.1.0")
    assert not outcome.success and outcome.terminal
    assert "could not be reached (ConnectError) for 0.3 seconds" in outcome.content


async def test_the_retry_after_a_timeout_waits_for_the_request_still_being_served(
    api: respx.MockRouter,
) -> None:
    # A first summary under load took longer than the tool's timeout; its retry used to send
    # the same request again while the server was still working on the first.
    served = 0

    async def slow(request: httpx.Request) -> httpx.Response:
        nonlocal served
        served += 1
        await asyncio.sleep(0.3)
        return httpx.Response(200, json=SUMMARY)

    api.get(SUMMARY_URL).mock(side_effect=slow)
    async with ReleaseTools(BASE, timeout_s=0.2, summary_retry_delay_s=0) as release_tools:
        outcome = await release_tools.get_release_summary("v2.1.0")
    assert outcome.success, outcome.content
    assert served == 1
    assert api.routes[0].call_count == 1


async def test_a_request_that_never_ends_is_given_up_on_once_and_not_sent_twice(
    api: respx.MockRouter,
) -> None:
    sent = 0

    async def hang(request: httpx.Request) -> httpx.Response:
        nonlocal sent
        sent += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    api.get(SUMMARY_URL).mock(side_effect=hang)
    async with ReleaseTools(BASE, timeout_s=0.05, summary_retry_delay_s=0) as release_tools:
        outcome = await release_tools.get_release_summary("v2.1.0")
        assert not outcome.success
        assert "did not answer within 0.05 seconds" in outcome.content
        assert sent == 1
        # Once the request is over (its bound: both attempts), a new call asks again.
        await asyncio.sleep(0.1)
        await release_tools.get_release_summary("v2.1.0")
        assert sent == 2


async def test_a_retry_is_recorded_on_the_tools_span(api: respx.MockRouter) -> None:
    from agent.telemetry.tool_calls import TracedToolExecutor
    from agent.testing.telemetry import Telemetry

    otel = Telemetry()
    api.get(SUMMARY_URL).mock(
        side_effect=[
            httpx.Response(503),
            httpx.Response(200, json={}),
            httpx.Response(200, json={}),
        ]
    )
    registry = ToolRegistry()
    async with register_release_tools(registry, BASE, token=TOKEN, release_id="v2.1.0"):
        traced = TracedToolExecutor(registry, tracer=otel.tracer, metrics=otel.metrics)
        call = ToolCall(id="c1", name="get_release_summary", arguments={"release_id": "v2.1.0"})
        result = await traced.execute(call)
        assert result.success
        again = await traced.execute(call)  # answered at once: no retry on its span
    assert again.success
    first, second = otel.finished("execute_tool get_release_summary")
    assert first.attributes["detective.tool.retry.count"] == 1
    assert first.attributes["detective.tool.retry.reason"] == "unavailable"
    assert [event.name for event in first.events] == ["detective.tool.retry"]
    assert "detective.tool.retry.count" not in second.attributes
    otel.tracer_provider.shutdown()
    otel.meter_provider.shutdown()


async def test_a_timed_out_retry_says_so_on_the_span(api: respx.MockRouter) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.3)
        return httpx.Response(200, json=SUMMARY)

    api.get(SUMMARY_URL).mock(side_effect=slow)
    async with ReleaseTools(BASE, timeout_s=0.2, summary_retry_delay_s=0) as release_tools:
        with provider.get_tracer("t").start_as_current_span("execute_tool") as span:
            assert (await release_tools.get_release_summary("v2.1.0")).success
    attributes = span.attributes or {}
    assert attributes["detective.tool.retry.reason"] == "timeout"
    assert attributes["detective.tool.joined_in_flight"] is True
    provider.shutdown()
