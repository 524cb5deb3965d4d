"""One TLS context for all the HTTP clients of the process.

httpx builds a TLS context for every client it creates, plain-http ones included, and building
one loads the whole CA bundle: about 39 ms of CPU here against 0.16 ms for a client that is
given a ready context. A run creates two clients (the model adapter's, the release tools'), and
an eval run one per provider it probes, so a context each cost every assessment ~80 ms of CPU.
An `ssl.SSLContext` is safe to share between clients, threads and event loops.
"""

from __future__ import annotations

import ssl
from functools import cache
from typing import Any

import httpx


@cache
def shared_ssl_context() -> ssl.SSLContext:
    # httpx's own defaults (certifi's bundle, SSL_CERT_FILE / SSL_CERT_DIR when set).
    return httpx.create_ssl_context()


def async_client(**options: Any) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` with `options`, verifying TLS with the shared context."""
    return httpx.AsyncClient(verify=shared_ssl_context(), **options)
