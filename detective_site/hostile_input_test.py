"""NUL characters in URLs, queries, cookies and headers: 400/404, never 500 (on PostgreSQL too:
run this file with DATABASE_URL pointing at one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def manager_client(make_release: Callable[..., Any]) -> Client:
    make_release("v2.1.0")
    user = User.objects.create_user("manager", password="pw-123456789")
    user.groups.add(Group.objects.get(name="Release managers"))
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/releases/%00/", 404),
        ("/releases/v2.1.0%00/", 404),
        ("/releases/%00/reassess", 404),
        ("/releases/?q=%00", 400),
        ("/releases/?q=v2%00&severity=high", 400),
        ("/releases/?severity=%00", 400),
        ("/releases/?%00=1", 400),
        ("/admin/releases/release/?q=%00", 400),
        ("/admin/auth/user/?q=a%00b", 400),
        ("/evals/compare/1/?against=%00", 400),
        ("/%00", 404),
    ],
)
def test_nul_in_the_url_is_400_or_404(manager_client: Client, path: str, status: int) -> None:
    response = manager_client.get(path)
    assert response.status_code == status


def test_the_release_pages_still_work(manager_client: Client) -> None:
    assert manager_client.get("/releases/?q=v2").status_code == 200
    assert manager_client.get("/releases/v2.1.0/").status_code == 200


@pytest.mark.parametrize(
    "path", ["/api/releases/%00/summary", "/api/releases/v2.1.0%00/summary", "/api/risk-reports%00"]
)
def test_the_api_answers_nul_in_the_path_with_a_json_404(path: str) -> None:
    response = Client().get(path, headers={"Authorization": "Bearer x"})
    assert response.status_code == 404
    assert "NUL" in response.json()["error"]


def test_nul_in_a_cookie_or_a_header_is_400(manager_client: Client) -> None:
    manager_client.cookies["sessionid"] = "abc\x00def"
    assert manager_client.get("/releases/").status_code == 400
    response = Client().get(
        "/api/releases/v2.1.0/summary", headers={"Authorization": "Bearer a\x00"}
    )
    assert response.status_code == 400


def test_anonymous_nul_requests_get_an_answer_too() -> None:
    client = Client(raise_request_exception=False)
    assert client.get("/releases/%00/").status_code == 404
    assert client.get("/accounts/login/?next=%00").status_code == 400
