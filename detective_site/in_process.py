"""The site's HTTP API answered inside this process, for `assess` and `run_evals`.

The agent's tools always speak HTTP to the release API; with no web server running, their
requests go to the site itself through this httpx transport. It calls Django's WSGI handler on
a small pool of threads: a request is then one plain synchronous call, where the ASGI handler
hops between the event loop and its one sync thread for every middleware and restores the
context variables at each hop (about 40 hops per API request: a fifth of a 20-trial eval run's
CPU went there).

A request that is slow to answer holds its thread until it is done, even after the caller gave
up (an eval scenario's `timeout` fault: its hang is capped near the tools' own timeout for
that reason). Database connections need no closing here: with `CONN_MAX_AGE` 0, Django closes
each request's connection when the request ends.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import httpx
from django.core.handlers.wsgi import WSGIHandler


class InProcessTransport(httpx.AsyncBaseTransport):
    def __init__(self, app: WSGIHandler, threads: int = 4) -> None:
        self._wsgi = httpx.WSGITransport(app=app)
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="site-api")

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._answer, request)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        response = self._wsgi.handle_request(request)
        # Read here, on the thread: the WSGI body is a synchronous stream.
        body = response.read()
        return httpx.Response(response.status_code, headers=response.headers, content=body)

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def site_wsgi_application() -> WSGIHandler:
    """The site as a WSGI application, instrumented like the web server (one trace)."""
    from detective_site.telemetry import instrument_web

    instrument_web()
    return WSGIHandler()
