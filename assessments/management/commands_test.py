"""The run_worker command's helpers (tests live here: a module inside commands/ is a command)."""

from __future__ import annotations

import pytest

# ---- run_worker: a database that blinks ---------------------------------------------------------


def test_the_worker_goes_on_through_a_short_database_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from django.db import OperationalError

    from assessments.management.commands.run_worker import run_through_database_outages

    calls: list[int] = []

    def work() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise OperationalError("server closed the connection unexpectedly")

    run_through_database_outages(work, wait=5, first_delay=0.01)
    assert len(calls) == 3
    warnings = [r for r in caplog.records if "database is not answering" in r.getMessage()]
    assert len(warnings) == 1  # one warning per outage, not one per try
    assert "server closed the connection unexpectedly" in warnings[0].getMessage()


def test_the_worker_gives_up_on_a_database_that_does_not_come_back() -> None:
    from django.db import InterfaceError

    from assessments.management.commands.run_worker import run_through_database_outages

    now = [0.0]
    calls: list[int] = []

    def work() -> None:
        calls.append(1)
        now[0] += 4.0
        raise InterfaceError("connection already closed")

    with pytest.raises(InterfaceError):
        run_through_database_outages(work, wait=10, first_delay=0.001, clock=lambda: now[0])
    # Failures at 4, 8, 12 and 16 s: the last is 12 s after the first, past the 10 s wait.
    assert len(calls) == 4


def test_any_other_error_of_the_worker_is_not_retried() -> None:
    from assessments.management.commands.run_worker import run_through_database_outages

    calls: list[int] = []

    def work() -> None:
        calls.append(1)
        raise ValueError("a bug")

    with pytest.raises(ValueError):
        run_through_database_outages(work, wait=10, first_delay=0.001)
    assert calls == [1]
