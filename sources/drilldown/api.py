"""The drill-down endpoints beside the release summary, for the agent's investigation tools:

- `GET /api/releases/<version>/tests?status=&name_contains=&limit=&offset=`
- `GET /api/releases/<version>/changes?path_prefix=&area=&limit=&offset=`
- `GET /api/releases/<version>/metrics/<metric>/history`
- `GET /api/releases/<version>/suspects?test=` (one failed test's suspect commits)

Callers authenticate as for the summary (`sources.release_api.caller_release`: a run's token reads
its own release alone, the API key any release). Every answer is JSON, errors included
(`{"error": ...}`, 400 for a query that cannot be read), and bounded: pages of at most
`MAX_LIMIT` entries with the offset of the next (`next_offset`, null on the last page).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from releases.models import Release
from sources.drilldown import changes, metrics, suspects, tests
from sources.drilldown.paging import PageBounds, QueryError, choice, text_filter
from sources.release_api import api_error, caller_release


def _answer(request: HttpRequest, version: str, read: Callable[[Release], Any]) -> HttpResponseBase:
    found = caller_release(request, version)
    if isinstance(found, JsonResponse):
        return found
    _caller, release = found
    try:
        return JsonResponse(read(release))
    except QueryError as error:
        return api_error(400, f"Invalid query: {error}.")
    except (metrics.UnknownMetric, suspects.UnknownTest) as error:
        return api_error(404, str(error))


@login_not_required
@csrf_exempt
@require_GET
def release_tests(request: HttpRequest, version: str) -> HttpResponseBase:
    def read(release: Release) -> dict[str, Any]:
        return tests.test_details(
            release,
            status=choice(request.GET, "status", tests.STATUSES),
            name_contains=text_filter(request.GET, "name_contains"),
            page=PageBounds.of(request.GET),
        )

    return _answer(request, version, read)


@login_not_required
@csrf_exempt
@require_GET
def release_changes(request: HttpRequest, version: str) -> HttpResponseBase:
    def read(release: Release) -> dict[str, Any]:
        area = text_filter(request.GET, "area").lower()
        known = changes.known_areas(changes.policy_settings())
        if area and area not in known:
            raise QueryError(f"area must be one of {', '.join(known)}, not {area!r}")
        return changes.code_changes(
            release,
            path_prefix=text_filter(request.GET, "path_prefix"),
            area=area,
            page=PageBounds.of(request.GET),
        )

    return _answer(request, version, read)


@login_not_required
@csrf_exempt
@require_GET
def metric_history(request: HttpRequest, version: str, metric: str) -> HttpResponseBase:
    def read(release: Release) -> dict[str, Any]:
        if not re.fullmatch(metrics.METRIC_PATTERN, metric):
            raise QueryError(f"{metric[:40]!r} is not a metric name")
        return metrics.metric_history(release, metric)

    return _answer(request, version, read)


@login_not_required
@csrf_exempt
@require_GET
def failure_suspects(request: HttpRequest, version: str) -> HttpResponseBase:
    def read(release: Release) -> dict[str, Any]:
        return suspects.failure_suspects(release, text_filter(request.GET, "test"))

    return _answer(request, version, read)
