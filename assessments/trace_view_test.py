from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.template.loader import render_to_string
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode, format_trace_id

from agent.telemetry import FileSpanExporter
from assessments.trace_view import (
    MAX_ROWS,
    MAX_VALUE_CHARS,
    Waterfall,
    build_waterfall,
    format_duration,
    load_waterfall,
)

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
MS = 1_000_000  # nanoseconds
T0 = 1_700_000_000_000 * MS


def span(
    span_id: str,
    name: str,
    start_ms: float,
    end_ms: float,
    parent: str | None = None,
    status: str = "UNSET",
    description: str | None = None,
    **attributes: Any,
) -> dict[str, Any]:
    status_dict: dict[str, Any] = {"status_code": status}
    if description:
        status_dict["description"] = description
    return {
        "name": name,
        "trace_id": TRACE_ID,
        "span_id": span_id,
        "parent_span_id": parent,
        "start_time_unix_nano": T0 + int(start_ms * MS),
        "end_time_unix_nano": T0 + int(end_ms * MS),
        "status": status_dict,
        "attributes": {key.replace("__", "."): value for key, value in attributes.items()},
    }


def a(**attributes: Any) -> dict[str, Any]:
    """Dotted attribute names for span(**...)."""
    return {key.replace(".", "__"): value for key, value in attributes.items()}


# One assessment, listed out of order as a merged file may be: the web request, the agent,
# two model calls (the first retried once), two tool calls (the second failed) and a tool's
# HTTP call back into the site.
SPANS = [
    span(
        "a2",
        "chat claude",
        100,
        1100,
        "a1",
        **a(
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "claude",
                "gen_ai.usage.input_tokens": 1000,
                "gen_ai.usage.output_tokens": 80,
                "detective.retry.count": 1,
            }
        ),
    ),
    span(
        "r0",
        "POST /releases/<str:version>/reassess",
        0,
        50,
        None,
        **a(
            **{
                "http.request.method": "POST",
                "http.route": "/releases/<str:version>/reassess",
                "http.response.status_code": 200,
            }
        ),
    ),
    span(
        "a1",
        "invoke_agent detective",
        20,
        2000,
        "r0",
        **a(
            **{
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.request.model": "claude",
                "gen_ai.usage.input_tokens": 2200,
                "gen_ai.usage.output_tokens": 200,
                "detective.run.retries": 1,
                "detective.run.status": "finished",
            }
        ),
    ),
    span(
        "rt",
        "retry",
        150,
        650,
        "a2",
        **a(
            **{
                "detective.retry.attempt": 1,
                "detective.retry.max_attempts": 3,
                "detective.retry.backoff_s": 0.5,
                "detective.retry.reason": "rate_limited",
            }
        ),
    ),
    span(
        "t1",
        "execute_tool get_release_summary",
        1100,
        1300,
        "a1",
        **a(
            **{
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_release_summary",
                "detective.tool.success": True,
            }
        ),
    ),
    span(
        "h1",
        "GET",
        1110,
        1290,
        "t1",
        **a(
            **{
                "http.request.method": "GET",
                "url.full": "http://127.0.0.1:8000/api/releases/v1/summary?token=secret",
                "http.response.status_code": 200,
            }
        ),
    ),
    span(
        "a3",
        "chat claude",
        1300,
        1900,
        "a1",
        **a(
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.response.model": "claude-2025",
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.output_tokens": 120,
            }
        ),
    ),
    span(
        "t2",
        "execute_tool file_risk_report",
        1900,
        1990,
        "a1",
        status="ERROR",
        description="HTTP 400: severity must be high, medium or low",
        **a(
            **{
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "file_risk_report",
                "detective.tool.success": False,
                "error.type": "ToolError",
            }
        ),
    ),
    span(
        "c1",
        "context.fit",
        30,
        40,
        "a1",
        **a(
            **{
                "detective.context.trimmed": True,
                "detective.context.messages_before": 12,
                "detective.context.messages_after": 8,
            }
        ),
    ),
]


def test_rows_are_in_tree_order_with_depth() -> None:
    waterfall = build_waterfall(TRACE_ID, SPANS)
    assert [(row.span_id, row.depth) for row in waterfall.rows] == [
        ("r0", 0),
        ("a1", 1),
        ("c1", 2),
        ("a2", 2),
        ("rt", 3),
        ("t1", 2),
        ("h1", 3),
        ("a3", 2),
        ("t2", 2),
    ]
    assert waterfall.available and waterfall.hidden == 0


def test_bars_are_placed_by_time_as_percentages() -> None:
    rows = {row.span_id: row for row in build_waterfall(TRACE_ID, SPANS).rows}
    # The trace runs from 0 to 2000 ms.
    assert (rows["r0"].offset_pct, rows["r0"].width_pct) == (0, 2.5)
    assert (rows["a1"].offset_pct, rows["a1"].width_pct) == (1, 99)
    assert (rows["a3"].offset_pct, rows["a3"].width_pct) == (65, 30)
    assert rows["a3"].start_ms == 1300 and rows["a3"].duration_ms == 600
    # A tiny span still gets a visible bar, and no bar runs past the end.
    assert rows["c1"].width_pct == 0.5
    for row in rows.values():
        assert row.offset_pct >= 0 and row.offset_pct + row.width_pct <= 100


def test_tokens_retries_and_errors() -> None:
    waterfall = build_waterfall(TRACE_ID, SPANS)
    rows = {row.span_id: row for row in waterfall.rows}
    assert (rows["a2"].input_tokens, rows["a2"].output_tokens, rows["a2"].retries) == (1000, 80, 1)
    assert rows["a1"].retries == 1 and rows["r0"].retries == 0
    assert not rows["t1"].has_tokens
    # Totals count each model call once, not again through the agent span above them.
    assert (waterfall.input_tokens, waterfall.output_tokens) == (2200, 200)
    assert waterfall.retries == 1
    assert waterfall.errors == 1
    assert rows["t2"].error == "HTTP 400: severity must be high, medium or low"
    assert rows["t1"].error is None


def test_categories_and_details() -> None:
    rows = {row.span_id: row for row in build_waterfall(TRACE_ID, SPANS).rows}
    assert {row.span_id: row.category for row in rows.values()} == {
        "r0": "http",
        "a1": "agent",
        "c1": "context",
        "a2": "llm",
        "rt": "retry",
        "t1": "tool",
        "h1": "http",
        "a3": "llm",
        "t2": "tool",
    }
    assert rows["a2"].detail == "claude"
    assert rows["a3"].detail == "claude-2025"
    assert rows["a1"].detail == "claude · finished"
    assert rows["rt"].detail == "attempt 1/3 · waited 500 ms · rate_limited"
    assert rows["t1"].detail == "get_release_summary · ok"
    assert rows["t2"].detail == "file_risk_report · failed"
    assert rows["c1"].detail == "trimmed 12 → 8 messages"
    assert rows["r0"].detail == "200"  # the route is the span's name already
    assert rows["h1"].detail == "GET /api/releases/v1/summary 200"  # no query string


def test_orphans_and_cycles_are_shown_not_lost() -> None:
    spans = [
        span("x1", "orphan", 0, 10, parent="not-in-file"),
        span("y1", "loop-a", 5, 6, parent="y2"),
        span("y2", "loop-b", 5, 6, parent="y1"),
        {"name": "no times", "span_id": "z"},
        "not a span",
    ]
    waterfall = build_waterfall(TRACE_ID, spans)  # type: ignore[arg-type]
    assert sorted(row.name for row in waterfall.rows) == ["loop-a", "loop-b", "orphan"]
    assert waterfall.rows[0].depth == 0


def test_a_large_trace_is_capped() -> None:
    spans = [span(f"s{i}", f"step {i}", i, i + 1) for i in range(MAX_ROWS + 7)]
    waterfall = build_waterfall(TRACE_ID, spans)
    assert len(waterfall.rows) == MAX_ROWS and waterfall.hidden == 7


def test_no_spans_is_not_available() -> None:
    waterfall = build_waterfall(TRACE_ID, [])
    assert not waterfall.available and waterfall.total_ms == 0


def test_durations_read_well() -> None:
    assert [format_duration(ms) for ms in [0, 0.4, 12.6, 999, 1500, 59_949, 125_000]] == [
        "0 ms",
        "<1 ms",
        "13 ms",
        "999 ms",
        "1.5 s",
        "59.9 s",
        "2 min 5 s",
    ]
    assert [tick.label for tick in build_waterfall(TRACE_ID, SPANS).ticks] == [
        "0 ms",
        "500 ms",
        "1.0 s",
        "1.5 s",
        "2.0 s",
    ]


def test_loads_a_trace_written_by_the_agents_exporter(tmp_path: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(tmp_path)))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span(
        "invoke_agent detective", attributes={"gen_ai.operation.name": "invoke_agent"}
    ) as root:
        with tracer.start_as_current_span(
            "chat m",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.usage.input_tokens": 10,
                "gen_ai.usage.output_tokens": 5,
            },
        ):
            pass
        with tracer.start_as_current_span("execute_tool t", kind=SpanKind.INTERNAL) as tool:
            tool.set_status(Status(StatusCode.ERROR, "boom"))
    provider.shutdown()
    trace_id = format_trace_id(root.get_span_context().trace_id)

    waterfall = load_waterfall(trace_id, tmp_path)
    assert [(row.name, row.depth) for row in waterfall.rows] == [
        ("invoke_agent detective", 0),
        ("chat m", 1),
        ("execute_tool t", 1),
    ]
    assert (waterfall.input_tokens, waterfall.output_tokens, waterfall.errors) == (10, 5, 1)


def test_a_missing_trace_or_a_bad_id_is_not_available(tmp_path: Path) -> None:
    assert not load_waterfall(TRACE_ID, tmp_path).available
    assert not load_waterfall("../../etc/passwd", tmp_path).available
    assert not load_waterfall("", tmp_path).available


# --- the partial ---------------------------------------------------------------------------


def render(waterfall: Waterfall | None) -> str:
    return render_to_string("releases/_trace.html", {"waterfall": waterfall})


def test_the_partial_draws_the_waterfall() -> None:
    page = render(build_waterfall(TRACE_ID, SPANS))
    assert page.count('role="row"') == len(SPANS) + 1  # the axis, then a row per span
    assert 'style="margin-left: 65.000%; width: 30.000%"' in page
    assert 'style="--depth: 3"' in page  # the retry, 3 deep
    assert "wf-row wf-retry wf-has-retry" in page
    assert "wf-row wf-tool wf-has-error" in page
    assert '<span class="wf-error">HTTP 400: severity must be high, medium or low</span>' in page
    assert "1,000→80 tok" in page
    assert "2,200 in / 200 out tokens" in page
    assert "1 retry" in page and "1 error" in page
    assert "not available" not in page


@pytest.mark.parametrize("waterfall", [None, build_waterfall(TRACE_ID, [])])
def test_the_partial_without_a_trace(waterfall: Waterfall | None) -> None:
    assert "Trace not available yet." in render(waterfall)


def test_the_partial_escapes_what_the_trace_says() -> None:
    evil = "<script>alert(1)</script>"
    spans = [span("e1", evil, 0, 5, status="ERROR", description=evil)]
    page = render(build_waterfall(TRACE_ID, spans))
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


# --- a span's details ------------------------------------------------------------------------


def test_a_rows_details_put_what_a_reader_looks_for_first_and_content_last() -> None:
    messages = '[{"role": "user", "parts": [{"type": "text", "content": "Assess v1"}]}]'
    spans = [
        span(
            "c1",
            "chat m",
            0,
            10,
            status="ERROR",
            description="HTTP 500",
            **a(
                **{
                    "zeta.custom": True,
                    "gen_ai.input.messages": messages,
                    "gen_ai.usage.output_tokens": 8,
                    "gen_ai.request.model": "m",
                    "gen_ai.response.finish_reasons": ["stop", "length"],
                    "gen_ai.operation.name": "chat",
                    "detective.retry.attempt": 2,
                    "error.type": "ServerError",
                }
            ),
        )
    ]
    [row] = build_waterfall(TRACE_ID, spans).rows
    assert [(item.key, item.value) for item in row.attributes if not item.content] == [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.request.model", "m"),
        ("gen_ai.usage.output_tokens", "8"),
        ("gen_ai.response.finish_reasons", "stop, length"),
        ("detective.retry.attempt", "2"),
        ("error.type", "ServerError"),
        ("zeta.custom", "true"),
        ("status", "HTTP 500"),
    ]
    [content] = [item for item in row.attributes if item.content]
    assert content.key == "gen_ai.input.messages"
    assert content.value.startswith('[\n  {\n    "role": "user"')  # pretty-printed


def test_long_content_is_cut() -> None:
    long = "x" * (MAX_VALUE_CHARS + 10)
    spans = [span("t1", "execute_tool t", 0, 1, **a(**{"gen_ai.tool.call.result": long}))]
    [row] = build_waterfall(TRACE_ID, spans).rows
    [content] = row.attributes
    assert content.value == "x" * MAX_VALUE_CHARS + "… (10 more characters)"


def test_the_partial_shows_details_and_the_full_trace_id_with_a_copy_button() -> None:
    evil = (
        '[{"role": "user", "parts": [{"type": "text", "content": "<img src=x onerror=alert(1)>"}]}]'
    )
    spans = [
        *SPANS,
        span("z9", "chat evil", 0, 1, **a(**{"gen_ai.input.messages": evil})),
    ]
    page = render(build_waterfall(TRACE_ID, spans))
    assert page.count('<details class="wf-details">') == len(spans)
    assert f'<code id="trace-id-{TRACE_ID}">{TRACE_ID}</code>' in page
    assert f'data-copy="trace-id-{TRACE_ID}"' in page
    assert "<dt>gen_ai.usage.input_tokens</dt><dd>1000</dd>" in page
    assert "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_a_trace_is_complete_once_the_runs_root_span_is_in() -> None:
    root = span(
        "w0",
        "invoke_workflow assessment",
        0,
        900,
        **a(**{"gen_ai.operation.name": "invoke_workflow"}),
    )
    web_only = [span("s1", "POST releases/<str:version>/reassess", 0, 20)]
    assert not build_waterfall(TRACE_ID, web_only).complete
    assert build_waterfall(TRACE_ID, [*web_only, root]).complete


def test_attribute_figures_carry_their_unit() -> None:
    chat = span(
        "c9",
        "chat m",
        0,
        300,
        **a(
            **{
                "gen_ai.response.time_to_first_chunk": 0.29499339900007726,
                "detective.tool.duration_ms": 12.5,
                "detective.context.utilisation": 0.381,
                "detective.usage.cost_usd": 0.00391,
                "detective.retry.backoff_s": 2.0,
                "some.ratio": 0.123456789,
                "gen_ai.usage.input_tokens": 420,
            }
        ),
    )
    [row] = build_waterfall(TRACE_ID, [chat]).rows
    shown = {item.key: item.value for item in row.attributes}
    assert shown["gen_ai.response.time_to_first_chunk"] == "295 ms"
    assert shown["detective.tool.duration_ms"] == "12 ms"
    assert shown["detective.context.utilisation"] == "38%"
    assert shown["detective.usage.cost_usd"] == "$0.0039"
    assert shown["detective.retry.backoff_s"] == "2.0 s"
    assert shown["some.ratio"] == "0.1235"
    assert shown["gen_ai.usage.input_tokens"] == "420"
