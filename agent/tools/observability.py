"""The observability tool: what the running version did, from its OpenTelemetry traces
(`GET /api/releases/<id>/traces`, the design's `/observability-traces`).

`get_observability_traces` shows the release's error groups (new, regressed, ongoing) with
their counts, routes, innermost in-app frame and first suspect commit, and its routes with the
baseline's and the release's requests, errors and latency, and one sample trace of the top
group with its spans (names, kinds, durations, which failed). It reads through the drill-downs'
path (`DrillDownTools._read`: the same token, checks and untrusted-data encoding).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.tools.decorator import Tool, method_tool
from agent.tools.drilldown import DrillDownTools, ReleaseId
from agent.tools.registry import ToolOutcome, ToolRegistry
from agent.tools.release_tools import ReleaseTools

__all__ = ["ObservabilityTools", "register_observability_tools", "sample_line", "trace_lines"]


class ObservabilityTools(DrillDownTools):
    def __repr__(self) -> str:
        return f"ObservabilityTools({self.release_tools!r})"

    def tools(self) -> list[Tool[..., Any]]:
        deadline = self.release_tools.deadline_s
        return [
            method_tool(
                self.get_observability_traces,
                name="get_observability_traces",
                timeout_s=deadline,
            )
        ]

    async def get_observability_traces(self, release_id: ReleaseId) -> ToolOutcome:
        """What the release does in production, from its traces: its error groups (new in
        this release first, then regressed, then ongoing), each with its exception, the
        innermost frame of the service's own code, its count and routes, and the first
        suspect commit whose changed lines the frames run through; and its routes with
        requests, errors and p95 before the deploy (baseline) and since; and one sample
        trace of the first group: its spans, how long each took and which failed.

        Use it when the summary names a new error group, or the error rate or latency rose,
        to say which route and which exception, and which commit. Cite the exception, the
        route and the figures as shown.

        Args:
            release_id: The release under assessment, for example "v2.1.0".
        """
        return await self._read(
            release_id, "traces", {}, "The error groups and routes", trace_lines
        )


def trace_lines(body: Mapping[str, Any]) -> list[str]:
    groups = body.get("error_groups") or []
    total = body.get("error_groups_total", len(groups))
    lines = [f"{total} error group{'' if total == 1 else 's'}; {body.get('spans', 0)} spans"]
    for group in groups:
        frame = group.get("frame") or {}
        where = f" in {frame.get('path')} `{frame.get('function')}`" if frame else ""
        routes = ", ".join(f"{route} ({n})" for route, n in (group.get("routes") or {}).items())
        line = f"{group.get('status')}: {group.get('exception_type')}{where}"
        line += f", {group.get('count')} times"
        if routes:
            line += f" on {routes}"
        suspect = group.get("suspect")
        if suspect:
            line += (
                f"; first suspect {str(suspect.get('sha', ''))[:7]} '{suspect.get('subject')}' "
                f"({suspect.get('author')})"
            )
        lines.append(line)
    if sample := sample_line(body.get("sample_trace")):
        lines.append(sample)
    for route in (body.get("routes") or [])[:10]:
        now, before = route.get("release") or {}, route.get("baseline") or {}
        line = (
            f"{route.get('route')}: {now.get('errors', 0)} errors of {now.get('requests', 0)} "
            f"requests, p95 {now.get('p95_ms')} ms"
        )
        if before:
            line += (
                f" (baseline: {before.get('errors', 0)} of {before.get('requests', 0)}, "
                f"p95 {before.get('p95_ms')} ms)"
            )
        lines.append(line)
    return lines


SAMPLE_SPANS_SHOWN = 8


def sample_line(sample: Any) -> str | None:
    """The top group's sample trace in one line: its spans in start order, the failing ones
    marked with their exception."""
    if not isinstance(sample, Mapping) or not sample.get("spans"):
        return None
    spans = [s for s in sample["spans"] if isinstance(s, Mapping)]
    shown = []
    for span in spans[:SAMPLE_SPANS_SHOWN]:
        text = (
            f"{span.get('name') or '(unnamed)'} ({span.get('kind')}, {span.get('duration_ms')} ms"
        )
        if span.get("error"):
            text += f", failed{': ' + str(span['exception']) if span.get('exception') else ''}"
        shown.append(text + ")")
    more = len(spans) - len(shown)
    seen = sample.get("spans_seen", len(spans))
    return (
        f"sample trace {sample.get('trace_id')} of {sample.get('exception_type')} "
        f"({seen} span{'' if seen == 1 else 's'}): "
        + " > ".join(shown)
        + (f" and {more} more" if more > 0 else "")
    )


def register_observability_tools(
    registry: ToolRegistry, release_tools: ReleaseTools
) -> ObservabilityTools:
    tools = ObservabilityTools(release_tools)
    tools.register(registry)
    return tools
