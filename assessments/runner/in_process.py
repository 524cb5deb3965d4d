"""The site's HTTP API answered inside this process, for `assess` and `run_evals`.

`in_process_api()` is the client to give the tools, and the URL they call.

The agent's tools always speak HTTP to the release API; with no web server running, their
requests go to the site itself through this httpx transport. It calls Django's WSGI handler on
a small pool of threads: a request is then one plain synchronous call, where the ASGI handler
hops between the event loop and its one sync thread for every middleware and restores the
context variables at each hop (about 40 hops per API request: a fifth of a 20-trial eval run's
CPU went there).

A request that is slow to answer holds its thread until it is done, even after the caller gave
up (an eval scenario's `timeout` fault: its hang is capped near the tools' own timeout for
that reason).

Each thread keeps its database connection from one request to the next, and the transport
closes them when it is closed: with the site's `CONN_MAX_AGE` of 0 Django would close it at the
end of every request and open a new one for the next (about 1.3 ms of CPU each on SQLite, two
per eval trial). Django still closes a connection that errored and is no longer usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.db import connections
from django.db.backends.signals import connection_created
from django.http.request import validate_host

from assessments.runner.process import instrument_web

# How long closing waits for busy threads before leaving their connections to the thread's end.
CLOSE_TIMEOUT_S = 5.0

_api_thread = threading.local()


def _keep_open(sender: Any, connection: Any, **kwargs: Any) -> None:
    if getattr(_api_thread, "keeps_connections", False):
        connection.close_at = None  # no age limit: see the module docstring


connection_created.connect(_keep_open, dispatch_uid="assessments.runner.in_process.keep_open")


class InProcessTransport(httpx.AsyncBaseTransport):
    def __init__(self, app: WSGIHandler, threads: int = 4) -> None:
        self._wsgi = httpx.WSGITransport(app=app)
        self._started = 0
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="site-api", initializer=self._enter_thread
        )

    def _enter_thread(self) -> None:
        _api_thread.keeps_connections = True
        with self._lock:
            self._started += 1

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
        try:
            await self._close_connections()
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def _close_connections(self) -> None:
        """Close each thread's connections on that thread (Django allows no other): one task
        per thread, held at a barrier until every thread has taken one."""
        with self._lock:
            threads = self._started
        if not threads:
            return
        barrier = threading.Barrier(threads)

        def close_here() -> None:
            # A thread still busy breaks the barrier: it closes its own when its task comes.
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=CLOSE_TIMEOUT_S)
            connections.close_all()

        loop = asyncio.get_running_loop()
        closing = [loop.run_in_executor(self._executor, close_here) for _ in range(threads)]
        await asyncio.wait(closing, timeout=CLOSE_TIMEOUT_S + 1)


def site_wsgi_application() -> WSGIHandler:
    """The site as a WSGI application, instrumented like the web server (one trace)."""
    instrument_web()
    return WSGIHandler()


def in_process_api(threads: int = 1) -> tuple[httpx.AsyncClient, str]:
    """An HTTP client whose requests this site answers in this process (its WSGI handler, on
    `threads` threads, 2 to 16), and the API URL to give the tools (`assess` and `run_evals`
    need no web server)."""
    transport = InProcessTransport(site_wsgi_application(), threads=min(16, max(2, threads)))
    return httpx.AsyncClient(transport=transport), in_process_url()


def in_process_url() -> str:
    """The site's own URL for requests that never leave the process: a host it accepts, and
    https when it redirects http to https."""
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # what Django allows then
    host = next((h for h in ("127.0.0.1", "localhost") if validate_host(h, allowed)), None)
    if host is None:
        host = next((h for h in allowed if h and "*" not in h), "localhost").lstrip(".")
    scheme = "https" if settings.SECURE_SSL_REDIRECT else "http"
    return f"{scheme}://{host}"
