"""The site's handler of unexpected errors: a database that does not answer is a 503.

A database restarting (PostgreSQL `pg_ctl restart`, a failover) makes every query fail with
OperationalError or InterfaceError for a moment: that is the service being unavailable, not a
bug, so pages answer 503 with a short page saying so (and Retry-After), the API a JSON 503.
Django calls this view inside its handler of the exception, so `sys.exc_info()` names it.
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views.defaults import server_error

RETRY_AFTER_SECONDS = 5
API_PREFIX = "/api/"


def database_unavailable(error: BaseException | None) -> bool:
    return isinstance(error, OperationalError | InterfaceError)


def handler500(request: HttpRequest) -> HttpResponse:
    if not database_unavailable(sys.exc_info()[1]):
        return server_error(request)
    if request.path_info.startswith(API_PREFIX):
        response: HttpResponse = JsonResponse(
            {"error": "The database is not answering; try again in a few seconds."}, status=503
        )
    else:
        # Rendered without a request or context, as the 500 page: the site is unwell.
        response = HttpResponse(loader.get_template("503.html").render(), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
