from __future__ import annotations

import pytest
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path

from detective_site.urls import urlpatterns as site_urlpatterns


@login_not_required
def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug in an API view")


# The site's routes plus an API view that fails (pytest.mark.urls points here).
urlpatterns = [path("api/boom", boom), *site_urlpatterns]


@pytest.fixture
def client() -> Client:
    return Client(raise_request_exception=False)


@pytest.mark.django_db
def test_an_unknown_api_address_answers_json_404(client: Client) -> None:
    response = client.get("/api/no-such-thing")
    assert response.status_code == 404
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {"error": "No such API endpoint: GET /api/no-such-thing."}


@pytest.mark.django_db
def test_a_method_the_endpoint_does_not_take_answers_json_405_with_allow(client: Client) -> None:
    response = client.post("/api/releases/v2.1.0/summary")
    assert response.status_code == 405
    assert response.headers["Allow"] == "GET"
    assert response.json() == {
        "error": "Method not allowed: POST /api/releases/v2.1.0/summary; this endpoint takes GET."
    }


@pytest.mark.django_db
@pytest.mark.urls("detective_site.api_errors_test")
def test_an_exception_in_an_api_view_answers_json_500_without_details(client: Client) -> None:
    response = client.get("/api/boom")
    assert response.status_code == 500
    assert response.json() == {"error": "Internal error on GET /api/boom: the server logged it."}
    assert "a bug" not in response.content.decode()


@pytest.mark.django_db
def test_the_api_own_json_errors_and_the_pages_are_left_as_they_are(client: Client) -> None:
    unauthorised = client.get("/api/releases/v2.1.0/summary")
    assert unauthorised.status_code == 401
    assert "error" in unauthorised.json()  # the API's own message, not replaced
    page = client.get("/no-such-page/")
    assert page.status_code in (302, 404)  # login first, or the HTML 404 page
    assert not page.headers["Content-Type"].startswith("application/json")
