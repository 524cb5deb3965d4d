"""Assessments from the browser: Reassess, the run page (live over a websocket), Cancel."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from assessments import selectors, services, tasks, timeline
from assessments.trace_view import load_waterfall
from releases import selectors as release_selectors
from releases.models import Conversation, Severity
from releases.views import HtmxHttpRequest

RUN_ASSESSMENT = "releases.run_assessment"


def _require_run_permission(request: HtmxHttpRequest) -> None:
    # The permission alone: the staff flag opens the admin, and grants nothing by itself here.
    if not request.user.has_perm(RUN_ASSESSMENT):
        raise PermissionDenied("You may not run assessments.")


def _run_or_404(request: HtmxHttpRequest, pk: UUID) -> Conversation:
    run = selectors.run_with_release(pk)
    if run is None:
        raise Http404("No such run.")
    if not selectors.can_view_run(request.user, run):
        raise PermissionDenied("You may not see this run.")
    return run


@require_POST
def reassess(request: HtmxHttpRequest, version: str, service: str | None = None) -> HttpResponse:
    """Start an assessment of the release (or join the one under way) and show it."""
    _require_run_permission(request)
    release = release_selectors.release_or_404(version, service)
    run = services.start_assessment(release, request.user, enqueue=tasks.enqueue_assessment)
    url = reverse("releases:run", args=[run.pk])
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


@require_GET
def run_detail(request: HtmxHttpRequest, pk: UUID) -> HttpResponse:
    run = _run_or_404(request, pk)
    # A worker that died leaves its run "running": the page is where someone notices.
    if run.is_active and services.fail_if_stale(run):
        run = _run_or_404(request, pk)
    template = "releases/run.html#run-body" if request.htmx else "releases/run.html"
    return render(request, template, _run_context(request, run))


@require_POST
def cancel(request: HtmxHttpRequest, pk: UUID) -> HttpResponse:
    _require_run_permission(request)
    run = services.cancel_assessment(_run_or_404(request, pk))
    if request.htmx:
        return render(request, "releases/run.html#run-actions", _run_context(request, run))
    return redirect("releases:run", pk=run.pk)


# How long after a run's end its page waits for the rest of its trace, refreshing the trace.
TRACE_GRACE = timedelta(seconds=60)

# A finished run's page shows a bounded transcript: each step's text and each message up to a
# limit, and the first messages; "Show more" (?full=1) shows everything.
PAGE_TEXT_LIMIT = 20_000
PAGE_MESSAGE_LIMIT = 4_000
PAGE_MESSAGES = 100


def _run_context(request: HtmxHttpRequest, run: Conversation) -> dict[str, Any]:
    events = selectors.run_events(run)
    finished = not run.is_active
    waterfall = load_waterfall(run.trace_id) if finished and run.trace_id else None
    full = request.GET.get("full") == "1"
    bounded = finished and not full
    transcript = selectors.run_messages(run) if finished else []
    hidden_messages = 0
    if bounded:
        hidden_messages = max(len(transcript) - PAGE_MESSAGES, 0)
        transcript = transcript[:PAGE_MESSAGES]
    for message in transcript:
        content = message.content or ""
        message.clipped_from = len(content) if bounded and len(content) > PAGE_MESSAGE_LIMIT else 0
        message.shown = content[:PAGE_MESSAGE_LIMIT] if message.clipped_from else content
    return {
        "run": run,
        "outcome": selectors.run_outcome(run) if finished and run.release_id else None,
        "trial": selectors.eval_trial(run),
        "can_review": request.user.has_perm("releases.review_report"),
        "severities": Severity.choices,
        "timeline": timeline.build(events, PAGE_TEXT_LIMIT if bounded else None),
        "transcript": transcript,
        "hidden_messages": hidden_messages,
        "waterfall": waterfall,
        # The run ended moments ago and its root span is not written yet: say so, and
        # refresh the trace until it is (or the grace period is over).
        "trace_arriving": waterfall is not None
        and not waterfall.complete
        and run.finished_at is not None
        and timezone.now() - run.finished_at < TRACE_GRACE,
        "can_cancel": run.is_active and request.user.has_perm(RUN_ASSESSMENT),
        # A failed or cancelled assessment can be run again from its page.
        "offer_retry": not run.is_active
        and run.status in ("failed", "cancelled")
        and run.release_id is not None
        and not run.metadata.get("eval"),
        "can_run": request.user.has_perm(RUN_ASSESSMENT),
        # An eval trial's page belongs to the Evals tab.
        "nav_section": "evals" if run.metadata.get("eval") else "releases",
    }
