"""A run's database calls through a restart: retried for a while, then failed saying why."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from django.db import InterfaceError, OperationalError, transaction
from pytest_django.fixtures import Settings

from assessments.runner.database import DatabaseUnavailable, retrying


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def flaky(failures: list[Exception]) -> Callable[[], str]:
    def call() -> str:
        if failures:
            raise failures.pop(0)
        return "saved"

    return call


def test_a_restart_costs_a_pause_and_two_lines_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    failures: list[Exception] = [
        OperationalError("terminating connection due to administrator command"),
        InterfaceError("the connection is closed"),
        OperationalError("the database system is starting up"),
    ]
    assert retrying(flaky(failures), sleep=clock.sleep, clock=clock) == "saved"
    assert clock.slept == [0.2, 0.4, 0.8]  # backing off
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said == [
        "the database is not answering (OperationalError: terminating connection due to "
        "administrator command); the run tries again for up to 20 s",
        "the database answers again, after 1.4 s",
    ]


def test_a_database_away_for_too_long_fails_the_call_saying_so() -> None:
    clock = Clock()
    failures: list[Exception] = [OperationalError("connection refused")] * 100
    with pytest.raises(DatabaseUnavailable) as raised:
        retrying(flaky(failures), wait=5, sleep=clock.sleep, clock=clock)
    assert str(raised.value) == "The database was unavailable: OperationalError: connection refused"
    assert 5 <= clock.now < 8
    assert max(clock.slept) == 2.0


def test_the_wait_is_the_setting_when_none_is_given(settings: Settings) -> None:
    settings.DETECTIVE_RUN_DATABASE_WAIT = 3
    clock = Clock()
    with pytest.raises(DatabaseUnavailable):
        retrying(flaky([OperationalError("refused")] * 100), sleep=clock.sleep, clock=clock)
    assert 3 <= clock.now < 5


def test_other_errors_are_not_retried() -> None:
    clock = Clock()
    with pytest.raises(ValueError):
        retrying(flaky([ValueError("a bug")]), sleep=clock.sleep, clock=clock)
    assert clock.slept == []


@pytest.mark.django_db
def test_inside_a_transaction_the_error_goes_to_whoever_opened_it() -> None:
    clock = Clock()
    with transaction.atomic(), pytest.raises(OperationalError):
        retrying(flaky([OperationalError("gone")]), sleep=clock.sleep, clock=clock)
    assert clock.slept == []
