"""A run's database calls through a database restart: retried for a bounded time, then failed
saying why.

A PostgreSQL restart (`pg_ctl restart`, a failover) breaks every open connection and refuses
new ones for a second or two. A run in flight would fail on its next write and its worker
with it; instead each of the run's database calls (saving an event, a message, the verdict,
the heartbeat) is tried again on a new connection, with a back-off, for up to
`DETECTIVE_RUN_DATABASE_WAIT` seconds (20 by default): a restart costs the run a pause, not
its life. A database away for longer fails the run with `DatabaseUnavailable`, whose message
says so ("The database was unavailable: ...") on the run page once the database is back.

The wait stays under the heartbeat's stale limit (30 s by default), so that the sweep never
takes a run that is only waiting for its database for a dead one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection

from agent.errors import AgentError
from assessments.layer_health import describe

logger = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_DELAY_S = 0.2
MAX_DELAY_S = 2.0
DATABASE_ERRORS = (OperationalError, InterfaceError)


class DatabaseUnavailable(AgentError):
    """The database did not answer for the run's wait: the run fails, saying so."""


def unavailable_message(error: BaseException) -> str:
    return f"The database was unavailable: {describe(error)}"


def retrying(
    call: Callable[[], T],
    *,
    wait: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """`call()`, called again on a new connection while the database does not answer, for up
    to `wait` seconds (the DETECTIVE_RUN_DATABASE_WAIT setting when None); then
    DatabaseUnavailable. Inside a transaction nothing is retried (the transaction is lost with
    its connection): the error goes to whoever opened it."""
    if wait is None:
        wait = float(settings.DETECTIVE_RUN_DATABASE_WAIT)
    since: float | None = None
    delay = FIRST_DELAY_S
    while True:
        try:
            result = call()
        except DATABASE_ERRORS as error:
            if connection.in_atomic_block:
                raise
            now = clock()
            if since is None:
                since = now
                logger.warning(
                    "the database is not answering (%s); the run tries again for up to %g s",
                    describe(error),
                    wait,
                )
            if now - since >= wait:
                raise DatabaseUnavailable(unavailable_message(error)) from error
            _drop_connection()
            sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)
            continue
        if since is not None:
            logger.warning("the database answers again, after %.1f s", clock() - since)
        return result


def _drop_connection() -> None:
    """Forget the broken connection: the next query opens a new one."""
    try:
        connection.close()
    except DatabaseError:
        connection.connection = None
