"""The site's handler of unexpected errors: a database that does not answer is a 503.

A database restarting (PostgreSQL `pg_ctl restart`, a failover) makes every query fail with
OperationalError or InterfaceError for a moment: that is the service being unavailable, not a
bug, so pages answer 503 with a short page saying so (and Retry-After), the API a JSON 503.
Django calls this view inside its handler of the exception, so `sys.exc_info()` names it.

Django logs every such answer as an error with its traceback: a page polled every second
during a 30 s restart would fill the log. `DatabaseOutageLogFilter` keeps the first 503 of an
outage, as one warning line without the traceback, and drops the others until none has come
for `OUTAGE_GAP_S`.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

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


# 503s closer together than this belong to the same outage.
OUTAGE_GAP_S = 30.0


class DatabaseOutageLogFilter(logging.Filter):
    """One warning per database outage for the 503s Django logs (see the module)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._last_503 = float("-inf")

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if getattr(record, "status_code", None) != 503 or not database_unavailable(error):
            return True
        now, previous = self._clock(), self._last_503
        self._last_503 = now
        if now - previous < OUTAGE_GAP_S:
            return False
        record.msg = f"{record.msg} (the database is not answering: %s; further 503s unlogged)"
        record.args = (*(record.args or ()), str(error).strip().splitlines()[0][:200])  # type: ignore[misc]
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True
