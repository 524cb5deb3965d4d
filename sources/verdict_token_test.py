"""A CI job reads its release's verdict with its ingestion token (sources/release_api.py):
the service's release by `?service=`, never another service's, never the agent's calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from assessments import filing
from releases.models import Release, Service
from sources import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop_release(make_release: Callable[..., Release]) -> Release:
    shop = Service.objects.create(name="Shop", slug="shop")
    made = make_release("v2.1.0")
    made.service = shop
    made.save()
    # The default service has a release of the same version: the service tells them apart.
    make_release("v2.1.0")
    return made


def get(client: Client, path: str, token: str) -> Any:
    return client.get(path, headers={"Authorization": f"Bearer {token}"})


def test_an_ingestion_token_reads_its_services_verdict(
    client: Client, shop_release: Release
) -> None:
    _, token = services.create_token("CI of shop", shop_release.service)
    filing.file_risk_report(release=shop_release, severity="high", findings=["x"])
    for name in ("shop", "Shop"):
        response = get(client, f"/api/releases/v2.1.0/verdict?service={name}", token)
        assert response.status_code == 200
        data = response.json()
        assert (data["state"], data["severity"]) == ("assessed", "high")
        assert data["url"] == f"http://testserver{shop_release.get_absolute_url()}"
    # Without the service: the default service's release, which this token may not read.
    response = get(client, "/api/releases/v2.1.0/verdict", token)
    assert response.status_code == 403
    assert response.json()["error"] == "This token may read Shop only."


def test_a_token_for_every_service_reads_any_and_an_unknown_service_is_a_404(
    client: Client, shop_release: Release
) -> None:
    _, token = services.create_token("CI of all", None)
    assert get(client, "/api/releases/v2.1.0/verdict", token).json()["state"] == "not_assessed"
    response = get(client, "/api/releases/v2.1.0/verdict?service=billing", token)
    assert response.status_code == 404
    assert response.json()["error"] == "No release 'v2.1.0' of the service 'billing'."


def test_a_revoked_token_and_the_agents_calls_are_refused(
    client: Client, shop_release: Release
) -> None:
    made, token = services.create_token("CI of shop", shop_release.service)
    # An ingestion token is not the agent's: the summary stays closed to it, saying why.
    refused = get(client, "/api/releases/v2.1.0/summary?service=shop", token)
    assert refused.status_code == 403
    assert (
        "An ingestion token (CI of shop) cannot read a release's summary" in refused.json()["error"]
    )
    made.revoked = True
    made.save()
    assert get(client, "/api/releases/v2.1.0/verdict?service=shop", token).status_code == 401
