"""Load shedding for OTLP ingestion: at most `DETECTIVE_OTLP_MAX_IN_FLIGHT` requests (4 by
default) are read and stored at once in one web process; the next is answered 429 with
`Retry-After` at once, before its body is read, and nothing of it is stored. The OTLP
specification makes 429 a retryable answer: every SDK's and Collector's exporter sends the
batch again after the time given.

Why a bound per process: ingestion's cost is the database merge (one transaction per release,
under a lock on the release's row, so requests for one release queue on it). Past a few in
flight, more only wait on the database while holding a worker thread and the request's memory;
shedding them keeps the pages and the API answering while a fleet of exporters backs off.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

__all__ = ["RETRY_AFTER_S", "InFlight", "in_flight"]

RETRY_AFTER_S = 5


class InFlight:
    """A count of the requests being ingested, bounded; thread-safe (daphne runs each sync
    view in a thread of its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    @property
    def count(self) -> int:
        return self._count

    @contextmanager
    def slot(self, limit: int | None = None) -> Iterator[bool]:
        """Yields True with a slot held until the block ends, or False when all are taken."""
        bound = settings.DETECTIVE_OTLP_MAX_IN_FLIGHT if limit is None else limit
        with self._lock:
            taken = self._count < bound
            if taken:
                self._count += 1
        try:
            yield taken
        finally:
            if taken:
                with self._lock:
                    self._count -= 1


in_flight = InFlight()
