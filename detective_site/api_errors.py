"""The release API answers its errors in JSON, as it answers everything else.

Django renders a 404 for an unknown address, a 405 for a method a view does not take
(`require_GET`, `require_POST`: an empty body) and a 500 for an exception as HTML pages meant
for a browser. Under `/api/` a caller is a program (the agent's tools, a CI job), so this
middleware, first in the stack, turns any error response there that is not JSON already into
`{"error": "..."}` with the same status and headers (a 405 keeps its `Allow`). Django has
logged the exception of a 500 by then; the body says nothing about it.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from django.http import HttpRequest, HttpResponseBase, JsonResponse

API_PREFIX = "/api/"
KEPT_HEADERS = ("Allow", "WWW-Authenticate", "Retry-After")


def api_error_message(request: HttpRequest, response: HttpResponseBase) -> str:
    status = response.status_code
    where = f"{request.method} {request.path}"
    if status == 404:
        return f"No such API endpoint: {where}."
    if status == 405:
        allowed = response.headers.get("Allow", "")
        return f"Method not allowed: {where}; this endpoint takes {allowed or 'no method'}."
    if status >= 500:
        return f"Internal error on {where}: the server logged it."
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return f"{phrase}: {where}."


class ApiErrorsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if (
            response.status_code < 400
            or not request.path_info.startswith(API_PREFIX)
            or response.headers.get("Content-Type", "").startswith("application/json")
        ):
            return response
        answer = JsonResponse(
            {"error": api_error_message(request, response)}, status=response.status_code
        )
        for header in KEPT_HEADERS:
            if header in response.headers:
                answer.headers[header] = response.headers[header]
        return answer
