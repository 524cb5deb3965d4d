"""The release manager's desk: the review queue, a decision on a report, a label exported as
an eval scenario."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from releases import selectors as release_selectors
from releases.models import ReviewDecision, RiskReport, Severity
from releases.views import HtmxHttpRequest, view_releases_required
from review import selectors, services
from review.forms import ReviewForm
from review.scenario import ScenarioRejected, scenario_id

REVIEW = "releases.review_report"


def _require_review_permission(request: HtmxHttpRequest) -> None:
    if not request.user.has_perm(REVIEW):
        raise PermissionDenied("You may not review risk reports.")


def _back(request: HtmxHttpRequest, fallback: str) -> str:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}):
        return target
    return fallback


def review_context(request: HtmxHttpRequest, **extra: Any) -> dict[str, Any]:
    return {"can_review": request.user.has_perm(REVIEW), "severities": Severity.choices, **extra}


TABS = ("waiting", "decided")


@require_GET
@view_releases_required
def review_queue(request: HtmxHttpRequest) -> HttpResponse:
    """The desk: the reports waiting for a person, or (tab=decided) the recent decisions."""
    if request.htmx and "live" in request.GET:
        return live(request)
    tab = request.GET.get("tab", "waiting")
    tab = tab if tab in TABS else "waiting"
    queue = selectors.review_queue() if tab == "waiting" else None
    context = review_context(
        request,
        tab=tab,
        queue=queue,
        waiting=release_selectors.review_count(),
        decisions=selectors.recent_decisions() if tab == "decided" else [],
        open_ids=[item.report.pk for item in queue.items] if queue else [],
        live_seconds=LIVE_SECONDS,
    )
    return render(request, "releases/review.html", context)


# How soon a decision made on another screen shows on this one.
LIVE_SECONDS = 5


def live(request: HtmxHttpRequest) -> HttpResponse:
    """The desk's poll: the items it still shows open, as they stand now (out of band)."""
    # Ids a report can have (an integer column): anything else asks for nothing.
    parts = request.GET.get("live", "").split(",")[: selectors.LIVE_LIMIT]
    ids = [int(p) for p in parts if p.isascii() and p.isdigit() and len(p) <= 9]
    items = selectors.live_items(ids)
    context = review_context(
        request,
        live=items,
        waiting=release_selectors.review_count(),
        open_ids=[item.report.pk for item in items if item.decision is None],
        live_seconds=LIVE_SECONDS,
        reasons=[],
    )
    return render(request, "releases/review.html#live", context)


@require_POST
def decide(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Accept or override a report; an htmx request gets the report's review box back."""
    _require_review_permission(request)
    report: RiskReport = selectors.report_for_review(pk)
    form = ReviewForm(report, request.POST)
    error = ""
    decision: ReviewDecision | None = None
    standing: ReviewDecision | None = None
    if form.is_valid():
        try:
            decision = services.decide_report(
                report,
                request.user,
                decision=form.cleaned_data["decision"],
                severity=form.cleaned_data["severity"],
                reason=form.cleaned_data["reason"],
                wrong_finding=form.wrong_finding_text(),
                supersedes=form.cleaned_data["supersedes"],
            )
        except services.AlreadyDecided as exc:
            error, standing = str(exc), exc.standing
        except services.ReviewError as exc:
            error = str(exc)
    else:
        error = " ".join(message for messages in form.errors.values() for message in messages)
    # Someone decided first: 409, naming who and when; the box shows their decision.
    status = 409 if standing is not None else 200
    if not request.htmx:
        if standing is not None:
            return HttpResponse(error, status=409, content_type="text/plain; charset=utf-8")
        return redirect(_back(request, reverse("releases:review")))
    context = review_context(
        request,
        report=report,
        decision=decision or standing,
        conflict=error if standing is not None else "",
        error=error,
        form_data=request.POST,
        # The count on the desk and the report's "needs a person" note change with it.
        waiting=release_selectors.review_count() if decision is not None else None,
        reasons=[],
    )
    return render(request, "releases/_review.html#decided", context, status=status)


@require_POST
def export(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Write the decision's label as an eval scenario where run_evals reads it."""
    _require_review_permission(request)
    decision = selectors.decision_with_report(pk)
    error = ""
    try:
        services.export_scenario(decision)
    except (services.ReviewError, ScenarioRejected) as exc:
        error = str(exc)
    if not request.htmx:
        return redirect(_back(request, reverse("releases:review")))
    context = review_context(request, decision=decision, export_error=error)
    return render(request, "releases/_review.html#export", context)


@require_GET
@view_releases_required
def scenario_file(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The decision as a scenario file, to download."""
    decision = selectors.decision_with_report(pk)
    try:
        text = services.scenario_toml(decision)
    except ScenarioRejected as exc:
        return HttpResponse(str(exc), status=422, content_type="text/plain; charset=utf-8")
    response = HttpResponse(text, content_type="application/toml; charset=utf-8")
    name = scenario_id(services.review_label(decision))
    response["Content-Disposition"] = f'attachment; filename="{name}.toml"'
    return response
