"""The evals pages: runs over time, one run, two runs compared; marking the baseline."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.middleware import HtmxDetails

from evals import selectors, services
from evals.live import can_watch
from evals.models import EvalRun

MARK_BASELINE = "evals.mark_baseline"


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def viewer_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Eval runs are for staff and whoever may view them (the Release managers)."""

    @wraps(view)
    def check(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not can_watch(request.user):
            return HttpResponseForbidden("You may not see evaluation runs.")
        return view(request, *args, **kwargs)

    return check


@require_GET
@viewer_required
@vary_on_headers("HX-Request")
def eval_run_list(request: HtmxHttpRequest) -> HttpResponse:
    services.fail_stale_runs()  # a run whose process died must not look alive
    # The runs table polls itself (target "eval-runs"); a page whose run just ended asks
    # for the whole page again.
    partial = request.htmx and request.htmx.target == "eval-runs"
    template = "evals/list.html#runs" if partial else "evals/list.html"
    return render(request, template, {"overview": selectors.overview()})


@require_GET
@viewer_required
def eval_run_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    services.fail_stale_runs()
    context = {
        "detail": selectors.run_detail(pk),
        "can_mark_baseline": request.user.has_perm(MARK_BASELINE),
    }
    return render(request, "evals/run.html", context)


@require_POST
@viewer_required
def mark_baseline(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    if not request.user.has_perm(MARK_BASELINE):
        return HttpResponseForbidden("You may not change the baseline.")
    run = get_object_or_404(EvalRun, pk=pk)
    error = ""
    try:
        services.mark_baseline(run)
    except ValueError as exc:
        error = str(exc)
    if request.htmx:
        context = {"run": run, "can_mark_baseline": True, "baseline_error": error}
        return render(request, "evals/run.html#baseline", context, status=400 if error else 200)
    return redirect("evals:run", pk=run.pk)


@require_GET
@viewer_required
def compare(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    against = request.GET.get("against", selectors.BASELINE)
    try:
        context: dict[str, Any] = {"view": selectors.compare_view(pk, against)}
    except selectors.NothingToCompare as exc:
        context = {"problem": str(exc), "run_id": pk}
    return render(request, "evals/compare.html", context)
