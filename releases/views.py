"""The release pages: the dashboard and the list. A release's own page shows the detail the
sources app keeps, and is served from there (sources/release_page.py)."""

from __future__ import annotations

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import push_url
from django_htmx.middleware import HtmxDetails

from releases import selectors
from releases.models import RunStatus, Severity
from releases.selectors import NONE, SORTS, ReleaseFilters

RUN_ASSESSMENT = "releases.run_assessment"
# Reading releases and their reports; the Release managers group has both. Without them a
# logged-in user gets 403, not data.
VIEW_RELEASES = ("releases.view_release", "releases.view_riskreport")
view_releases_required = permission_required(VIEW_RELEASES, raise_exception=True)
REVIEW_REPORT = "releases.review_report"
SORT_CHOICES = [
    ("-risk", "Highest risk"),
    ("risk", "Lowest risk"),
    ("-assessed", "Assessed most recently"),
    ("assessed", "Assessed longest ago"),
    ("-error_rate", "Highest error rate"),
    ("error_rate", "Lowest error rate"),
    ("-p95", "Slowest p95"),
    ("p95", "Fastest p95"),
]


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _release_filters(query: QueryDict) -> ReleaseFilters:
    """The list's filters from the query string; an unknown value means "any"."""
    severity = query.get("severity", "")
    run_state = query.get("run", "")
    sort = query.get("sort", "")
    return ReleaseFilters(
        search=query.get("q", "").strip()[:200],
        severity=severity if severity in [*Severity.values, NONE] else "",
        run_state=run_state if run_state in [*RunStatus.values, NONE] else "",
        sort=sort if sort in SORTS else "",
    )


@require_GET
@view_releases_required
def home(request: HtmxHttpRequest) -> HttpResponse:
    return render(request, "home.html", {"dashboard": selectors.dashboard()})


@require_GET
@view_releases_required
@vary_on_headers("HX-Request")  # the same URL answers a page or a partial
def release_list(request: HtmxHttpRequest) -> HttpResponse:
    filters = _release_filters(request.GET)
    page = selectors.release_page(filters, request.GET.get("page", 1))
    # The query without its empty fields: for the address bar and the page links.
    query = QueryDict(mutable=True)
    for key, value in request.GET.items():
        if value:
            query[key] = value
    context = {
        "page": page,
        "filters": filters,
        "query": query,
        "severities": Severity.choices,
        "run_states": RunStatus.choices,
        "sort_choices": SORT_CHOICES,
    }
    if not request.htmx:
        return render(request, "releases/list.html", context)
    response = render(request, "releases/list.html#table", context)
    return push_url(response, f"{request.path}?{query.urlencode()}" if query else request.path)
