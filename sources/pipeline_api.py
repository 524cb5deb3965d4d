"""`POST /api/releases/<version>/waiting?service=S`: a CI job says it waits for a person's
decision on the release's report (`detective verdict --wait-for-decision`). The report is
stamped "a pipeline waits since …" for the review page, and the answer is the verdict with the
review page's address, which the job prints once. A token as for the verdict: an ingestion
token (of that service, when it was made for one) or the site's API key. A report that needs
no person is left as it is (`waiting_since` null)."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from releases import selectors, services
from releases.release_verdict import VerdictState
from sources.release_api import api_error, bearer, named_release
from sources.selectors import TokenScope, token_scope


def _scope(request: HttpRequest) -> TokenScope | JsonResponse:
    token = bearer(request)
    if not token:
        return api_error(401, "Authentication required: send Authorization: Bearer <token>.")
    key = settings.DETECTIVE_API_KEY
    if key and hmac.compare_digest(token.encode(), key.encode()):
        return TokenScope(name="the API key", service_id=None)
    scope = token_scope(token)
    if scope is None:
        return api_error(401, "Invalid or expired token: send an ingestion token.")
    return scope


@login_not_required
@csrf_exempt
@require_POST
def pipeline_waiting(request: HttpRequest, version: str) -> JsonResponse:
    scope = _scope(request)
    if isinstance(scope, JsonResponse):
        return scope
    release = named_release(request, version, scope)
    if isinstance(release, JsonResponse):
        return release
    verdict = selectors.release_verdict(release)
    answer = verdict.as_json()
    since = None
    if verdict.state == VerdictState.NEEDS_PERSON and answer.get("report_id"):
        since = services.note_pipeline_waiting(answer["report_id"])
    review = f"{reverse('releases:review')}#queue-item-{answer.get('report_id')}"
    return JsonResponse(
        {
            **answer,
            "url": request.build_absolute_uri(release.get_absolute_url()),
            "review_url": request.build_absolute_uri(review),
            "waiting_since": since.isoformat() if since else None,
        }
    )
