"""Every route under /api/ is in the OpenAPI document (issue 37): the ninja operations and the
plain views a CI job or a curl user calls (sources/openapi_paths.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

# Not endpoints: the document itself, its page, and the signed-in index of the API.
NOT_ENDPOINTS = {"/api/openapi.json", "/api/docs", "/api/"}


def routes(patterns: list[Any], prefix: str = "") -> list[str]:
    found = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found += routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            found.append(route)
    return found


def as_openapi(route: str) -> str:
    path = "/" + route.lstrip("^").rstrip("$")
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", path)


@pytest.mark.django_db
def test_every_api_route_is_in_the_document() -> None:
    api = sorted(
        {as_openapi(r) for r in routes(get_resolver().url_patterns) if r.startswith("api/")}
    )
    # The walk reaches the plain views and ninja's own operations alike.
    assert {"/api/risk-reports", "/api/releases/{version}/tests", "/api/releases"} <= set(api)
    answer = Client().get("/api/openapi.json")
    assert answer.status_code == 200
    documented = answer.json()["paths"]
    missing = [path for path in api if path not in documented and path not in NOT_ENDPOINTS]
    assert missing == []
    # The ones the client and a curl user call, by method.
    for path, method in (
        ("/api/releases/bundle", "post"),
        ("/api/releases/{version}/verdict", "get"),
        ("/api/releases/{version}/waiting", "post"),
        ("/api/releases/{version}/suspects", "get"),
        ("/api/releases/{version}/metrics/{metric}/history", "get"),
        ("/api/releases/{version}/commits", "post"),
    ):
        assert method in documented[path], path
    assert len(documented) >= 14
