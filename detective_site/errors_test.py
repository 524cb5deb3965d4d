from __future__ import annotations

import logging

import pytest
from django.contrib.auth.models import User
from django.db import InterfaceError, OperationalError
from django.test import Client

from detective_site.errors import DatabaseOutageLogFilter
from releases import selectors


@pytest.fixture
def client_for(admin_user: User) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize(
    "error",
    [
        OperationalError("server closed the connection unexpectedly"),
        InterfaceError("connection already closed"),
    ],
)
def test_a_database_that_does_not_answer_is_a_503_with_a_short_page(
    client_for: Client, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def unavailable() -> None:
        raise error

    monkeypatch.setattr(selectors, "dashboard", unavailable)
    page = client_for.get("/")
    assert page.status_code == 503
    assert page["Retry-After"] == "5"
    assert "The database is not answering" in page.content.decode()
    assert len(page.content) < 5_000


@pytest.mark.django_db
def test_any_other_error_is_still_the_500_page(
    client_for: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise ValueError("a bug")

    monkeypatch.setattr(selectors, "dashboard", broken)
    page = client_for.get("/")
    assert page.status_code == 500
    assert "Something went wrong" in page.content.decode()


def request_log(status: int, error: BaseException) -> logging.LogRecord:
    """A record as Django's log_response makes it for an answer from the error handler."""
    record = logging.LogRecord(
        "django.request", logging.ERROR, __file__, 1, "%s: %s", ("Service Unavailable", "/"),
        (type(error), error, None),
    )  # fmt: skip
    record.status_code = status
    return record


def test_a_database_outage_is_one_warning_in_the_log_not_a_traceback_per_503() -> None:
    now = [0.0]
    outage = DatabaseOutageLogFilter(clock=lambda: now[0])
    error = OperationalError("the database system is shutting down\nDETAIL: more")
    kept = []
    for _ in range(40):  # a page every half second for 20 s
        record = request_log(503, error)
        if outage.filter(record):
            kept.append(record)
        now[0] += 0.5
    assert len(kept) == 1
    assert kept[0].levelname == "WARNING" and kept[0].exc_info is None
    assert kept[0].getMessage() == (
        "Service Unavailable: / (the database is not answering: the database system is "
        "shutting down; further 503s unlogged)"
    )
    # Other errors keep their traceback; a later outage is said again.
    assert outage.filter(request_log(500, ValueError("a bug")))
    now[0] += 60
    assert outage.filter(request_log(503, error))
