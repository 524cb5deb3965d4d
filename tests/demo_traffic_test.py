"""The demo's production signals come through the real path: `manage.py demo_traffic` runs the
demo shop's two seeded versions (Django with OpenTelemetry's Django instrumentation, each its
own process), sends them requests and exports their spans with the SDK's OTLP/HTTP exporter to
a live site. What the site kept is read back through the drill-down and the verdict: 1.1.0's
new ZeroDivisionError on the cart's route, its suspect the seeded commit that changed the line,
the routes' figures; 1.0.0 none of it; the run's token revoked."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command

import demo_shop
from releases.models import Release
from sources.judging import judge_release
from sources.models import Commit, IngestionToken
from tests.live_site import LiveSite
from traces.models import TraceIntake

pytestmark = pytest.mark.django_db(transaction=True)
API_KEY = "d" * 40
CART = "GET cart/<int:cart_id>/total"
REQUESTS = 12


def drill(site: LiveSite, version: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{site.url}/api/releases/{version}/traces",
        params={"service": "shop"},
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_demo_traffic_sends_the_shops_spans_through_otlp(tmp_path: Path) -> None:
    call_command("seed_demo", stdout=io.StringIO())
    before, after = (
        Release.objects.get(service__name=demo_shop.SERVICE, version=version)
        for version in demo_shop.VERSIONS
    )
    assert not TraceIntake.objects.filter(release__in=[before, after]).exists()
    output = io.StringIO()
    with LiveSite(tmp_path / "logs", {"DETECTIVE_API_TOKEN": API_KEY}, workers=0) as site:
        call_command("demo_traffic", url=site.url, requests=REQUESTS, stdout=output)
        drilled, earlier = drill(site, "v1.1.0"), drill(site, "v1.0.0")
    said = output.getvalue()
    # Carts 6 and 12 of 12 hold an emptied line: 1.1.0 divides by its quantity.
    assert "v1.1.0: 36 requests, 2 failed, 36 spans exported" in said, said
    assert "v1.0.0: 36 requests, 0 failed, 36 spans exported" in said, said
    assert TraceIntake.objects.get(release=after).spans == 3 * REQUESTS
    assert TraceIntake.objects.get(release=before).spans == 3 * REQUESTS

    [group] = drilled["error_groups"]
    assert (group["status"], group["exception_type"], group["count"]) == (
        "new",
        "ZeroDivisionError",
        2,
    )
    assert group["routes"] == {CART: 2}
    # The frame of the deployed file, as the SDK recorded it, and its line in the repository.
    assert group["frame"]["path"].endswith("/v1.1.0/shop/pricing.py")
    assert group["frame"]["function"] == "line_total"
    culprit = Commit.objects.get(release=after)
    assert group["suspect"]["sha"] == culprit.sha
    assert group["suspect"]["subject"] == "fix(cart): Round prices per unit"
    routes = {row["route"]: row["release"] for row in drilled["routes"]}
    assert set(routes) == {CART, "GET products", "GET health"}
    assert (routes[CART]["requests"], routes[CART]["errors"]) == (REQUESTS, 2)
    assert (routes["GET products"]["requests"], routes["GET products"]["errors"]) == (REQUESTS, 0)
    assert routes[CART]["p95_ms"] is not None
    assert earlier["error_groups"] == []
    assert all(row["release"]["errors"] == 0 for row in earlier["routes"])

    evidence = " ".join(judge_release(after).verdict.evidence())
    assert (
        f"ZeroDivisionError in shop/pricing.py `line_total`: 2 of {REQUESTS} requests of {CART} "
        "since v1.1.0 (none before); new in this release; first suspect "
        f"{culprit.sha[:7]} 'fix(cart): Round prices per unit'"
    ) in evidence, evidence
    assert "ZeroDivisionError" not in " ".join(judge_release(before).verdict.evidence())
    # The run's token sent the spans and was revoked after it.
    token = IngestionToken.objects.get(service=after.service)
    assert token.revoked
