"""The release page's *Errors & traces* section (`/traces/releases/<id>/`): drawn by htmx into
the release page when it loads (a link without JS), from the same reads as the drill-down
(`selectors.release_traces`). Its own address because the release page is `sources`', below
this app."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from releases.models import Release
from releases.views import view_releases_required
from traces.selectors import release_traces


@require_GET
@view_releases_required
def release_panel(request: HttpRequest, pk: int) -> HttpResponse:
    release = get_object_or_404(Release.objects.select_related("service"), pk=pk)
    context = {"release": release, "traces": release_traces(release)}
    return render(request, "traces/panel.html", context)
