"""The release page's *Errors & traces* section (`/traces/releases/<id>/`): drawn by htmx into
the release page when it loads (a link without JS), from the same reads as the drill-down
(`selectors.release_traces`). Its own address because the release page is `sources`', below
this app."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from releases.models import Release
from releases.views import view_releases_required
from traces.selectors import release_traces

MAX_DEPTH_SHOWN = 6


def _drawn(sample: dict[str, Any]) -> dict[str, Any]:
    """A sample trace as the page draws it: each span's depth under its parent (indented) and
    its place on the trace's time line (a bar, in percent of the trace's length)."""
    spans = sample.get("spans") or []
    parents = {s["span_id"]: s.get("parent_span_id", "") for s in spans}
    ends = [s["start_ms"] + s["duration_ms"] for s in spans]
    length = max(ends, default=0.0) or 1.0
    drawn = []
    for span in spans:
        depth, parent = 0, span.get("parent_span_id", "")
        while parent in parents and depth < MAX_DEPTH_SHOWN:
            depth, parent = depth + 1, parents[parent]
        drawn.append(
            {
                **span,
                "depth": depth,
                "left_pct": round(100 * span["start_ms"] / length, 1),
                "width_pct": max(round(100 * span["duration_ms"] / length, 1), 0.5),
            }
        )
    return {**sample, "spans": drawn}


@require_GET
@view_releases_required
def release_panel(request: HttpRequest, pk: int) -> HttpResponse:
    release = get_object_or_404(Release.objects.select_related("service"), pk=pk)
    traces = release_traces(release, with_samples=True)
    for group in traces["error_groups"]:
        if group.get("sample_trace"):
            group["sample_trace"] = _drawn(group["sample_trace"])
    return render(request, "traces/panel.html", {"release": release, "traces": traces})
