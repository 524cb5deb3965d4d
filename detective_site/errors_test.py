from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import InterfaceError, OperationalError
from django.test import Client

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
