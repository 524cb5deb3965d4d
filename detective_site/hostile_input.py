"""Refuse requests whose URL, query, cookies or headers carry what the database cannot store.

A NUL character passes Django's URL routing and query parsing untouched and reaches the ORM,
where PostgreSQL refuses it with a DataError (a 500). Refusing it here, first in the
middleware stack, covers every view, the admin's searches and the session cookie at once:
a NUL in the path is a page that cannot exist (404), anywhere else a bad request (400).
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponseBase, JsonResponse

NUL = "\x00"
API_PREFIX = "/api/"


def nul_problem(request: HttpRequest) -> tuple[int, str] | None:
    """(status, reason) when the request carries a NUL where it must not, else None."""
    if NUL in request.path_info or NUL in request.path:
        return 404, "The address contains a NUL character."
    if NUL in request.META.get("QUERY_STRING", "") or any(
        NUL in key or any(NUL in value for value in values) for key, values in request.GET.lists()
    ):
        return 400, "The query string contains a NUL character."
    if any(NUL in key or NUL in value for key, value in request.COOKIES.items()):
        return 400, "A cookie contains a NUL character."
    if any(NUL in str(value) for key, value in request.META.items() if key.startswith("HTTP_")):
        return 400, "A header contains a NUL character."
    return None


class HostileInputMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        problem = nul_problem(request)
        if problem is None:
            return self.get_response(request)
        status, reason = problem
        if request.path_info.startswith(API_PREFIX):
            return JsonResponse({"error": reason}, status=status)
        # Raised, not returned, so that Django renders the site's own 400/404 page.
        if status == 404:
            raise Http404(reason)
        raise BadRequest(reason)
