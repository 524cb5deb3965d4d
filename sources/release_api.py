"""The release API the agent's tools and pipelines call: a release's summary and its verdict,
and who may call it (`caller_release`, for the drill-downs beside it too).

`GET /api/releases/<version>/summary`, JSON (`?view=brief` gives the summary without the
policy's signals and the drill-downs: the small prompt profile's view, `risk.digest`); and
`GET /api/releases/<version>/verdict`, the release's verdict for pipelines (and for a signed-in
user with the permission to view releases, in the browser). Filing a report,
`POST /api/risk-reports`, is a run's: assessments/report_api.py, with the same callers.

Callers authenticate with `Authorization: Bearer <token>`:
- a run's own token (issued when the run starts, valid while it is active, for its release
  alone: a report for another release is refused with 403);
- or the site's API key (`DETECTIVE_API_TOKEN`), for callers outside the site;
- for the verdict, also an ingestion token (a CI job's, `sources.selectors.token_scope`).
A browser session is not enough (nor needed): these views are exempt from the login
requirement and from CSRF, and look at the bearer token only.

Here, not in releases: the summary is the policy's verdict with the release's history
(`sources.judging`), and the verdict takes this app's ingestion tokens.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from releases import eval_hooks, selectors, validation
from releases.models import Conversation, Release
from sources import judging
from sources.selectors import TokenScope, token_scope

VIEW_RELEASE = "releases.view_release"
BRIEF_VIEW = "brief"


@dataclass(frozen=True)
class Caller:
    """Who is calling: a run (with its token), or an external caller (with the API key)."""

    run: Conversation | None = None

    def may_touch(self, version: str) -> bool:
        return self.run is None or (
            self.run.release is not None and self.run.release.version == version
        )

    def may_touch_service(self, service: str | None) -> bool:
        """A run's token names its own release's service, if it names one (slug or name)."""
        if self.run is None or self.run.release is None or not service:
            return True
        own = self.run.release.service
        return service.casefold() in (own.slug.casefold(), own.name.casefold())

    def release(
        self, version: str, service: str | None = None, *, with_policy: bool = False
    ) -> Release | None:
        """The release this caller means by `version`: a run's own release (whatever its
        service), else that version of `service` (its slug or name; none: the default);
        `with_policy`: read with the policy in force, for judging it."""
        if self.run is not None and self.run.release is not None:
            return self.run.release if self.run.release.version == version else None
        if not validation.is_valid_version(version):
            return None
        return selectors.find_release(version, service, with_policy=with_policy)


def api_error(status: int, message: str, **extra: Any) -> JsonResponse:
    response = JsonResponse({"error": message, **extra}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="detective"'
    return response


def bearer(request: HttpRequest) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def authenticate(request: HttpRequest) -> Caller | JsonResponse:
    token = bearer(request)
    if not token:
        return api_error(401, "Authentication required: send Authorization: Bearer <token>.")
    key = settings.DETECTIVE_API_KEY
    if key and hmac.compare_digest(token.encode(), key.encode()):
        return Caller()
    run = selectors.run_for_api_token(token)
    if run is None:
        scope = token_scope(token)
        if scope is not None:
            # A real token, of another kind: say what it is for, not "invalid".
            return api_error(
                403,
                f"An ingestion token ({scope.name}) cannot {_what(request)}: it sends a "
                "release's data and reads its verdict (GET /api/releases/<version>/verdict). "
                "Use the site's API key (DETECTIVE_API_TOKEN) for this call.",
            )
        return api_error(401, "Invalid or expired token.")
    return Caller(run=run)


def _what(request: HttpRequest) -> str:
    path = request.path.rstrip("/")
    if path.endswith("/summary"):
        return "read a release's summary"
    if path.endswith("/risk-reports"):
        return "file risk reports"
    return "read a release's drill-downs"


def caller_release(request: HttpRequest, version: str) -> tuple[Caller, Release] | JsonResponse:
    """The authenticated caller and the release it may read as `version`, or the error to
    answer: 401 without a valid token, 403 for another release than a run's own, 404 for
    none. For the endpoints beside the summary that read one release (the drill-downs);
    `?service=` names the service for the API key (a run's token reads its own release)."""
    caller = authenticate(request)
    if isinstance(caller, JsonResponse):
        return caller
    if eval_hooks.trial_api(caller.run) is not None:
        # An eval trial never reads a real release: its scenario's, if it was ingested.
        scenario_release = eval_hooks.trial_release(caller.run, version)  # type: ignore[arg-type]
        if scenario_release is None:
            return api_error(404, f"No detail of release {version!r} in this eval scenario.")
        return caller, scenario_release
    release = _own_release(caller, version, named_service(request))
    return release if isinstance(release, JsonResponse) else (caller, release)


def named_service(request: HttpRequest) -> str | None:
    """The service `?service=` names (its slug or name); None: the default service."""
    return request.GET.get("service", "").strip() or None


def named_release(
    request: HttpRequest, version: str, scope: TokenScope | None
) -> Release | JsonResponse:
    """The release a pipeline's call names (`?service=`), or a 404; a token scoped to one
    service may read that service's releases only (403)."""
    named = request.GET.get("service", "").strip()
    release = (
        selectors.find_release(version, named or None)
        if validation.is_valid_version(version)
        else None
    )
    if release is None:
        of = f" of the service {named!r}" if named else ""
        return api_error(404, f"No release {version!r}{of}.")
    if scope is not None and scope.service_id not in (None, release.service_id):
        return api_error(403, f"This token may read {scope.service_name or 'one service'} only.")
    return release


def _own_release(
    caller: Caller, version: str, service: str | None = None, *, with_policy: bool = False
) -> Release | JsonResponse:
    if not caller.may_touch(version) or not caller.may_touch_service(service):
        own = caller.run.release  # type: ignore[union-attr]
        return api_error(403, f"This token is for release {own.version} only.")
    release = caller.release(version, service, with_policy=with_policy)
    if release is None:
        of = f" of the service {service!r}" if service else ""
        return api_error(404, f"No release {version!r}{of}.")
    return release


@login_not_required
@csrf_exempt
@require_GET
def release_summary(request: HttpRequest, version: str) -> HttpResponseBase:
    caller = authenticate(request)
    if isinstance(caller, JsonResponse):
        return caller
    trials = eval_hooks.trial_api(caller.run)
    if trials is not None and caller.run is not None:
        # An eval trial reads its scenario's data, never a real release.
        return trials.summary_response(
            caller.run,
            version,
            asynchronous=isinstance(request, ASGIRequest),
            brief=wants_brief(request),
        )
    release = _own_release(caller, version, named_service(request), with_policy=True)
    if isinstance(release, JsonResponse):
        return release
    # The data as it is, and beside it the policy's signals (the model reads them instead of
    # computing them), for a long change list a compact form of it, and what the drill-downs
    # have to show.
    return JsonResponse(judging.judge_release(release).for_agent(brief=wants_brief(request)))


def wants_brief(request: HttpRequest) -> bool:
    return request.GET.get("view") == BRIEF_VIEW


@login_not_required
@csrf_exempt
@require_GET
def release_verdict(request: HttpRequest, version: str) -> HttpResponseBase:
    """The release's verdict (`selectors.release_verdict`), with the link to its page: of the
    service `?service=` names (its slug or name; the default service when absent). A bearer
    token as for the other calls, an ingestion token (a CI job's, `token_scope`; one made for
    a service reads that service only), or a signed-in user who may view releases."""
    user = getattr(request, "user", None)
    browsing = (
        "Authorization" not in request.headers
        and user is not None
        and user.is_authenticated
        and user.has_perm(VIEW_RELEASE)
    )
    scope: TokenScope | None = None
    if not browsing:
        caller = authenticate(request)
        if isinstance(caller, JsonResponse):
            scope = token_scope(bearer(request))
            if scope is None:
                return caller
        elif not caller.may_touch(version) or not caller.may_touch_service(named_service(request)):
            return api_error(403, f"This token is for release {caller.run.release.version} only.")  # type: ignore[union-attr]
    release = named_release(request, version, scope)
    if isinstance(release, JsonResponse):
        return release
    answer = selectors.release_verdict(release).as_json()
    page = request.build_absolute_uri(release.get_absolute_url())
    return JsonResponse({**answer, "url": page, "review_url": review_url(request, answer)})


def review_url(request: HttpRequest, answer: dict[str, Any]) -> str | None:
    """The report's item on the review desk (what a person decides there), if it has one."""
    if not answer.get("report_id"):
        return None
    return request.build_absolute_uri(
        f"{reverse('releases:review')}#queue-item-{answer['report_id']}"
    )
