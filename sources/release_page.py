"""A release's page: its verdict, reports and runs (releases' tables), and below them the detail
this app keeps (test cases, commits, metric samples: `selectors.release_sections`), one tab,
filter or page of which an htmx request draws again.

Here, not in releases, because the detail is sources'. The addresses and names are the
release pages' (`releases:detail`, `releases:service_detail`: release_urls.py here, joined
into that namespace by detective_site/urls.py); the template is `releases/detail.html`.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import push_url

from releases import selectors
from releases.models import Severity
from releases.release_verdict import POLICY_SOURCE_LABEL
from releases.views import (
    REVIEW_REPORT,
    RUN_ASSESSMENT,
    HtmxHttpRequest,
    view_releases_required,
)
from sources.selectors import release_sections

SECTIONS_TARGET = "release-sections"


@require_GET
@view_releases_required
@vary_on_headers("HX-Request", "HX-Target")  # the same URL answers a page or its sections
def release_detail(
    request: HtmxHttpRequest, version: str, service: str | None = None
) -> HttpResponse:
    if request.htmx and request.htmx.target == SECTIONS_TARGET:
        # A tab, a filter or a page of the release's detail: only that part is drawn again.
        release = selectors.release_or_404(version, service)
        context = {"release": release, "sections": release_sections(release, request.GET)}
        response = render(request, "releases/detail.html#sections", context)
        return push_url(response, request.get_full_path())
    detail = selectors.release_detail(version, service)
    context = {
        "detail": detail,
        "release": detail.release,
        "sections": release_sections(detail.release, request.GET),
        "can_reassess": request.user.has_perm(RUN_ASSESSMENT),
        "can_review": request.user.has_perm(REVIEW_REPORT),
        "severities": Severity.choices,
        # Without a report, the policy's verdict is the gate's (issue 37); said on the page.
        "gate": None if detail.latest_report else selectors.release_verdict(detail.release),
        "gate_source_label": POLICY_SOURCE_LABEL,
    }
    return render(request, "releases/detail.html", context)
