"""The observability tool at the HTTP level (respx): what it asks and what the model reads."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest
import respx

from agent.messages import ToolCall
from agent.tools.observability import ObservabilityTools, register_observability_tools
from agent.tools.registry import ToolRegistry
from agent.tools.release_tools import ReleaseTools

BASE = "http://releases.test"
TOKEN = "tok_live_0123456789abcdef"
TRACES = {
    "release": "1.1.0",
    "error_groups_total": 1,
    "spans": 360,
    "error_groups": [
        {
            "status": "new",
            "exception_type": "ZeroDivisionError",
            "frame": {"path": "/srv/app/shop/pricing.py", "line": 2, "function": "line_total"},
            "count": 10,
            "routes": {"GET /cart/{cart_id}/total": 10},
            "suspect": {"sha": "a1b2c3d4e5", "subject": "Round prices per line",
                        "author": "Ana Lima"},
        }
    ],
    "routes": [
        {
            "route": "GET /cart/{cart_id}/total",
            "baseline": None,
            "release": {"requests": 60, "errors": 10, "p95_ms": 3.1},
        }
    ],
}  # fmt: skip


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        yield router


@pytest.fixture
async def tools() -> AsyncIterator[ObservabilityTools]:
    async with ReleaseTools(
        BASE, token=TOKEN, release_id="1.1.0", summary_retry_delay_s=0, reconnect=False
    ) as release_tools:
        yield ObservabilityTools(release_tools)


async def test_the_traces_lead_with_new_groups_route_and_suspect(
    api: respx.MockRouter, tools: ObservabilityTools
) -> None:
    route = api.get(f"{BASE}/api/releases/1.1.0/traces").respond(200, json=TRACES)
    registry = ToolRegistry()
    register_observability_tools(registry, tools.release_tools)
    [described] = registry.get_tools()
    assert described.name == "get_observability_traces"
    outcome = await registry.execute(
        ToolCall(id="c1", name="get_observability_traces", arguments={"release_id": "1.1.0"})
    )
    assert outcome.success
    assert route.calls.last.request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert json.loads(outcome.content)["in_short"] == [
        "1 error group; 360 spans",
        "new: ZeroDivisionError in /srv/app/shop/pricing.py `line_total`, 10 times on "
        "GET /cart/{cart_id}/total (10); first suspect a1b2c3d 'Round prices per line' "
        "(Ana Lima)",
        "GET /cart/{cart_id}/total: 10 errors of 60 requests, p95 3.1 ms",
    ]


async def test_another_release_is_refused(api: respx.MockRouter, tools: ObservabilityTools) -> None:
    outcome = await tools.get_observability_traces("1.0.0")
    assert not outcome.success and "Refused" in outcome.content


async def test_the_top_groups_sample_trace_is_one_line_of_its_spans(
    api: respx.MockRouter, tools: ObservabilityTools
) -> None:
    spans = [
        {
            "name": "GET /cart/{cart_id}/total",
            "kind": "server",
            "duration_ms": 12.5,
            "error": True,
            "exception": "ZeroDivisionError",
        },
        {"name": "SELECT shop.cart", "kind": "client", "duration_ms": 3.0, "error": False},
    ] + [{"name": f"span {n}", "kind": "internal", "duration_ms": 1.0} for n in range(8)]
    body = {
        **TRACES,
        "sample_trace": {"trace_id": "ab" * 16, "exception_type": "ZeroDivisionError",
                         "spans": spans, "spans_seen": 14},
    }  # fmt: skip
    api.get(f"{BASE}/api/releases/1.1.0/traces").respond(200, json=body)
    outcome = await tools.get_observability_traces("1.1.0")
    shown = json.loads(outcome.content)
    assert shown["in_short"][2] == (
        f"sample trace {'ab' * 16} of ZeroDivisionError (14 spans): GET /cart/{{cart_id}}/total "
        "(server, 12.5 ms, failed: ZeroDivisionError) > SELECT shop.cart (client, 3.0 ms) > "
        "span 0 (internal, 1.0 ms) > span 1 (internal, 1.0 ms) > span 2 (internal, 1.0 ms) > "
        "span 3 (internal, 1.0 ms) > span 4 (internal, 1.0 ms) > span 5 (internal, 1.0 ms) "
        "and 2 more"
    )
    assert shown["sample_trace"]["spans"][1]["name"] == "SELECT shop.cart"
