"""A run's trace as a span waterfall: one row per span, in tree order, with its bar placed
by time (offset and width as percentages of the whole trace).

The spans come from the trace file the agent's telemetry writes (read through the seam,
`assessments.runner.traces`):
the web request, the task, the agent, each model call with its retries, each tool call and the
tools' HTTP calls back into the site. Each row also carries the span's attributes for its
details (what a click on the row shows): the ones a reader looks for first (model, tokens,
finish reason, retry attempt, error), then the rest by name, and the captured content
(prompts, answers, tool arguments and results) when content capture was on, pretty-printed
and cut at MAX_VALUE_CHARS.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from assessments.runner.traces import read_run_trace

# Beyond this a page stops being readable, and a runaway trace must not make a huge page.
MAX_ROWS = 400
# The narrowest bar, so a 1 ms span next to a 2 minute run is still visible.
MIN_BAR_PCT = 0.4
# Indentation stops growing here; deeper spans still show their depth in the data.
MAX_INDENT = 10
TICKS = (0, 25, 50, 75, 100)
# A span's details list these first, in this order.
FIRST_ATTRIBUTES = (
    "gen_ai.operation.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
    "detective.retry.attempt",
    "detective.retry.max_attempts",
    "detective.retry.count",
    "detective.retry.reason",
    "error.type",
    "gen_ai.tool.name",
    "detective.release.id",
    "detective.run.id",
)
# Captured content: shown as blocks of text, last.
CONTENT_ATTRIBUTES = (
    "gen_ai.system_instructions",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
)
# A page must stay a page, whatever a prompt holds.
MAX_VALUE_CHARS = 4000


@dataclass(frozen=True)
class Attribute:
    key: str
    value: str
    content: bool = False


@dataclass(frozen=True)
class SpanRow:
    span_id: str
    name: str
    category: str  # agent, llm, tool, retry, context, http, other: the bar's colour
    depth: int
    start_ms: float  # from the start of the trace
    duration_ms: float
    offset_pct: float
    width_pct: float
    detail: str  # a short label: the model, the tool and its outcome, the retry's wait ...
    input_tokens: int | None
    output_tokens: int | None
    retries: int
    error: str | None
    attributes: tuple[Attribute, ...] = ()

    @property
    def indent(self) -> int:
        return min(self.depth, MAX_INDENT)

    @property
    def duration_label(self) -> str:
        return format_duration(self.duration_ms)

    @property
    def has_tokens(self) -> bool:
        return self.input_tokens is not None or self.output_tokens is not None


@dataclass(frozen=True)
class Tick:
    pct: int
    label: str


@dataclass(frozen=True)
class Waterfall:
    trace_id: str
    rows: list[SpanRow]
    total_ms: float
    input_tokens: int | None
    output_tokens: int | None
    retries: int
    errors: int
    hidden: int  # spans left out beyond MAX_ROWS
    # The run's root span (`invoke_workflow ...`) is in: the worker writes a trace when its
    # root ends, after the run's last event, so until then the trace is still arriving.
    complete: bool = False

    @property
    def available(self) -> bool:
        return bool(self.rows)

    @property
    def duration_label(self) -> str:
        return format_duration(self.total_ms)

    @property
    def ticks(self) -> list[Tick]:
        return [Tick(pct, format_duration(self.total_ms * pct / 100)) for pct in TICKS]


def load_waterfall(trace_id: str, directory: Path | None = None) -> Waterfall:
    """The waterfall of one trace; an empty one (not `available`) when the trace has no file
    yet or the id is not a trace id."""
    try:
        spans = read_run_trace(trace_id, directory)
    except ValueError:
        spans = []
    return build_waterfall(trace_id, spans)


def build_waterfall(trace_id: str, spans: Sequence[Mapping[str, Any]]) -> Waterfall:
    timed = [span for span in spans if isinstance(span, Mapping) and _start(span) is not None]
    if not timed:
        return Waterfall(trace_id, [], 0.0, None, None, 0, 0, 0)
    trace_start = min(_start(span) or 0 for span in timed)
    trace_end = max(_end(span) for span in timed)
    total_ns = max(trace_end - trace_start, 1)

    ordered = list(_tree_order(timed))
    rows = [_row(span, depth, trace_start, total_ns) for span, depth in ordered[:MAX_ROWS]]
    input_tokens, output_tokens = _token_totals(timed)
    retry_spans = sum(1 for span in timed if span.get("name") == "retry")
    counted_retries = sum(_int(_attrs(span).get("detective.retry.count")) or 0 for span in timed)
    return Waterfall(
        trace_id=trace_id,
        rows=rows,
        total_ms=total_ns / 1e6,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        retries=max(retry_spans, counted_retries),
        errors=sum(1 for span in timed if _error(span) is not None),
        hidden=max(len(ordered) - MAX_ROWS, 0),
        complete=any(_is_workflow_root(span) for span in timed),
    )


def _is_workflow_root(span: Mapping[str, Any]) -> bool:
    return _attrs(span).get("gen_ai.operation.name") == "invoke_workflow" or str(
        span.get("name") or ""
    ).startswith("invoke_workflow ")


def format_duration(ms: float) -> str:
    if ms < 1:
        return "<1 ms" if ms > 0 else "0 ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


# --- tree --------------------------------------------------------------------------------


def _tree_order(spans: Sequence[Mapping[str, Any]]) -> Iterable[tuple[Mapping[str, Any], int]]:
    """Depth-first, children by start time. A span whose parent is not in the file (a remote
    parent, or one not exported yet) is a root, so no span is ever lost."""
    by_id = {span.get("span_id"): span for span in spans}
    children: dict[Any, list[Mapping[str, Any]]] = {}
    roots: list[Mapping[str, Any]] = []
    for span in spans:
        parent = span.get("parent_span_id")
        if parent and parent in by_id and parent != span.get("span_id"):
            children.setdefault(parent, []).append(span)
        else:
            roots.append(span)
    seen: set[int] = set()
    stack = [(span, 0) for span in sorted(roots, key=_sort_key, reverse=True)]
    while stack:
        span, depth = stack.pop()
        if id(span) in seen:  # a damaged file could hold a cycle
            continue
        seen.add(id(span))
        yield span, depth
        kids = children.get(span.get("span_id"), [])
        stack.extend((kid, depth + 1) for kid in sorted(kids, key=_sort_key, reverse=True))
    # Spans only reachable through a cycle have no root; show them at the top level.
    for span in sorted(spans, key=_sort_key):
        if id(span) not in seen:
            yield span, 0


def _sort_key(span: Mapping[str, Any]) -> tuple[int, str]:
    return (_start(span) or 0, str(span.get("span_id") or ""))


# --- one row -------------------------------------------------------------------------------


def _row(span: Mapping[str, Any], depth: int, trace_start: int, total_ns: int) -> SpanRow:
    start = _start(span) or trace_start
    end = _end(span)
    offset = (start - trace_start) / total_ns * 100
    width = max((end - start) / total_ns * 100, MIN_BAR_PCT)
    offset = max(min(offset, 100 - width), 0.0)
    attributes = _attrs(span)
    category = _category(span, attributes)
    retries = _int(attributes.get("detective.retry.count"))
    if retries is None:
        retries = _int(attributes.get("detective.run.retries"))
    return SpanRow(
        span_id=str(span.get("span_id") or ""),
        name=str(span.get("name") or "span"),
        category=category,
        depth=depth,
        start_ms=(start - trace_start) / 1e6,
        duration_ms=(end - start) / 1e6,
        offset_pct=round(offset, 3),
        width_pct=round(width, 3),
        detail=_detail(category, attributes, str(span.get("name") or "")),
        input_tokens=_int(attributes.get("gen_ai.usage.input_tokens")),
        output_tokens=_int(attributes.get("gen_ai.usage.output_tokens")),
        retries=retries or 0,
        error=_error(span),
        attributes=_details(span, attributes),
    )


def _details(span: Mapping[str, Any], attributes: Mapping[str, Any]) -> tuple[Attribute, ...]:
    first = [key for key in FIRST_ATTRIBUTES if key in attributes]
    content = [key for key in CONTENT_ATTRIBUTES if key in attributes]
    shown = set(first) | set(content)
    rest = sorted(str(key) for key in attributes if key not in shown)
    items = [Attribute(key, _value(key, attributes[key])) for key in (*first, *rest)]
    status = span.get("status")
    if isinstance(status, Mapping) and status.get("description"):
        items.append(Attribute("status", _text(status.get("description"))))
    items.extend(Attribute(key, _content(attributes[key]), content=True) for key in content)
    return tuple(items)


# Attributes whose figures have a unit the key's name does not spell out fully.
SECONDS = {"gen_ai.response.time_to_first_chunk", "detective.retry.backoff_s"}
SHARES = {"detective.context.utilisation"}


def _value(key: str, value: Any) -> str:
    """An attribute's value with its unit: durations in ms or s, shares in %, costs in $;
    any other float rounded (no 0.29499339900007726)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _text(value)
    if key in SECONDS or key.endswith("_s"):
        return format_duration(value * 1000)
    if key.endswith("_ms"):
        return format_duration(value)
    if key in SHARES:
        return f"{value:.0%}"
    if key.endswith("_usd"):
        return f"${value:.4f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return _text(value)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ", ".join(_text(item) for item in value)
    return _cut(str(value))


def _content(value: Any) -> str:
    """Captured content, JSON pretty-printed when it is JSON (the conventions' parts)."""
    text = str(value)
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return _cut(text)


def _cut(text: str) -> str:
    if len(text) <= MAX_VALUE_CHARS:
        return text
    return f"{text[:MAX_VALUE_CHARS]}… ({len(text) - MAX_VALUE_CHARS:,} more characters)"


def _category(span: Mapping[str, Any], attributes: Mapping[str, Any]) -> str:
    name = str(span.get("name") or "")
    operation = attributes.get("gen_ai.operation.name")
    if name == "retry":
        return "retry"
    if operation == "invoke_agent":
        return "agent"
    if operation in {"chat", "text_completion", "generate_content"}:
        return "llm"
    if operation == "execute_tool":
        return "tool"
    if name.startswith("context."):
        return "context"
    if any(key.startswith("http.") for key in attributes):
        return "http"
    return "other"


def _detail(category: str, attributes: Mapping[str, Any], name: str) -> str:
    get = attributes.get
    if category == "llm":
        return str(get("gen_ai.response.model") or get("gen_ai.request.model") or "")
    if category == "agent":
        model = get("gen_ai.request.model")
        status = get("detective.run.status")
        return " · ".join(str(part) for part in (model, status) if part)
    if category == "tool":
        success = get("detective.tool.success")
        outcome = {True: "ok", False: "failed"}.get(success, "") if success is not None else ""
        return " · ".join(part for part in (str(get("gen_ai.tool.name") or ""), outcome) if part)
    if category == "retry":
        parts = []
        attempt, limit = get("detective.retry.attempt"), get("detective.retry.max_attempts")
        if attempt is not None:
            parts.append(f"attempt {attempt}" + (f"/{limit}" if limit is not None else ""))
        backoff = _float(get("detective.retry.backoff_s"))
        if backoff is not None:
            parts.append(f"waited {format_duration(backoff * 1000)}")
        if get("detective.retry.reason"):
            parts.append(str(get("detective.retry.reason")))
        return " · ".join(parts)
    if category == "context":
        before, after = (
            get("detective.context.messages_before"),
            get("detective.context.messages_after"),
        )
        if get("detective.context.trimmed") and before is not None and after is not None:
            return f"trimmed {before} → {after} messages"
        return ""
    if category == "http":
        method = get("http.request.method") or get("http.method") or ""
        target = get("http.route") or _path(get("url.full") or get("http.url")) or get("url.path")
        status = get("http.response.status_code") or get("http.status_code")
        if target and str(target) in name:  # a server span is already named by its route
            method = target = ""
        return " ".join(str(part) for part in (method, target, status) if part)
    return ""


def _path(url: Any) -> str:
    # The path only: a query string is no business of a trace page.
    if not isinstance(url, str) or not url:
        return ""
    return urlsplit(url).path


def _error(span: Mapping[str, Any]) -> str | None:
    status = span.get("status")
    if not isinstance(status, Mapping) or status.get("status_code") != "ERROR":
        return None
    description = status.get("description") or _attrs(span).get("error.type")
    return str(description) if description else "error"


def _token_totals(spans: Sequence[Mapping[str, Any]]) -> tuple[int | None, int | None]:
    """Tokens of the spans that report them and have no descendant that does: the agent's
    span repeats the sum of its model calls, which must not be counted twice."""
    parents_of_carriers: set[Any] = set()
    by_id = {span.get("span_id"): span for span in spans}
    carriers = [span for span in spans if _carries_tokens(span)]
    for span in carriers:
        parent = span.get("parent_span_id")
        seen: set[Any] = set()
        while parent in by_id and parent not in seen:
            seen.add(parent)
            parents_of_carriers.add(parent)
            parent = by_id[parent].get("parent_span_id")
    leaves = [span for span in carriers if span.get("span_id") not in parents_of_carriers]
    totals: list[int | None] = []
    for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
        values = [_int(_attrs(span).get(key)) for span in leaves]
        known = [value for value in values if value is not None]
        totals.append(sum(known) if known else None)
    return totals[0], totals[1]


def _carries_tokens(span: Mapping[str, Any]) -> bool:
    attributes = _attrs(span)
    return (
        _int(attributes.get("gen_ai.usage.input_tokens")) is not None
        or _int(attributes.get("gen_ai.usage.output_tokens")) is not None
    )


# --- reading span fields defensively (the file is data, not code) ---------------------------


def _attrs(span: Mapping[str, Any]) -> Mapping[str, Any]:
    attributes = span.get("attributes")
    return attributes if isinstance(attributes, Mapping) else {}


def _start(span: Mapping[str, Any]) -> int | None:
    return _int(span.get("start_time_unix_nano"))


def _end(span: Mapping[str, Any]) -> int:
    start = _start(span) or 0
    end = _int(span.get("end_time_unix_nano"))
    return end if end is not None and end >= start else start


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
