"""`GET /api/releases/<version>/traces?service=`: a release's error groups and routes
(`selectors.release_traces`), for the agent's `get_observability_traces`. Callers as for the
other drill-downs (`sources.release_api.caller_release`: a run's token, its own release; the
API key, any)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from sources.release_api import caller_release
from traces.selectors import release_traces


@login_not_required
@csrf_exempt
@require_GET
def traces(request: HttpRequest, version: str) -> HttpResponseBase:
    found = caller_release(request, version)
    if isinstance(found, JsonResponse):
        return found
    _caller, release = found
    return JsonResponse(release_traces(release))
