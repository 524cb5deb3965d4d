"""Traces from a second real SDK: Node's OpenTelemetry SDK (`@opentelemetry/sdk-trace-base`)
through its real OTLP/HTTP protobuf exporter (`@opentelemetry/exporter-trace-otlp-proto`),
configured by the SDK's own environment variables, to a live site. What the site kept of them:
the release's figures per route, and an error group for the exception thrown in one of the
three routes, its frames read from Node's own stack trace and its first suspect the commit that
changed the throwing line.

The packages are installed by `.ci/run` (`npm ci` in tests/node_otlp, versions pinned by its
package-lock.json); without them the test skips, or fails under CI (tests/node_sdk.py)."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db.models import Sum

from detective_client.records import CommitRecord, FileChangeRecord
from releases.models import Release, Service
from sources import services as sources_services
from sources.judging import judge_release
from sources.services import Origin
from tests.live_site import LiveSite
from tests.node_sdk import FOLDER, SCRIPT, without_node_sdk
from traces.models import ErrorGroup, ErrorRelease, RouteMinute

pytestmark = pytest.mark.django_db(transaction=True)
API_KEY = "n" * 40
SERVICE = "shop-node"
CART = "GET /cart/{cart_id}/total"

# The service's own module, a real file: the frame of the throw is line 3 of shop/pricing.js.
PRICING = (
    '"use strict";\n'
    "function lineTotal(price, quantity) {\n"
    "  if (quantity === 0) throw new RangeError(`cannot split ${price} over 0 items`);\n"
    "  return Math.round((price / quantity) * quantity * 100) / 100;\n"
    "}\n"
    "module.exports = { lineTotal };\n"
)


@pytest.fixture(autouse=True)
def node_sdk() -> None:
    verdict, reason = without_node_sdk(FOLDER, os.environ)
    if verdict == "skip":
        pytest.skip(reason)
    if verdict == "fail":
        pytest.fail(reason)


def export(site: LiveSite, token: str, version: str, pricing: Path, *, failing: bool) -> int:
    environment = {
        **os.environ,
        # The SDK's own variables, as docs/using/errors-and-traces.md gives them.
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"{site.url}/otlp",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{token}",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
    }
    done = subprocess.run(
        ["node", str(SCRIPT), version, str(pricing), "1" if failing else "0"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{site.log_text()}"
    result = json.loads(done.stdout)
    assert result["ok"] is True, result
    return int(result["spans"])


def drill(site: LiveSite, version: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{site.url}/api/releases/{version}/traces",
        params={"service": SERVICE},
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def release(service: Service, version: str, deployed: datetime) -> Release:
    return Release.objects.create(
        service=service,
        version=version,
        changes=["feat(cart): refuse empty carts"],
        test_results={"passed": 40, "failed": 0, "skipped": 0},
        deployment_metrics={"error_rate": 0.004, "response_time_p95": 120.0},
        deployed_at=deployed,
    )


def culprit_commit(target: Release) -> str:
    """2.1.0's range: one commit that wrote lines 2 and 3 of shop/pricing.js (the throw)."""
    sha = "b2c3d4e5" * 5
    record = CommitRecord(
        sha=sha,
        author_name="Rui Costa",
        author_email="rui@example.com",
        authored_at=datetime.now(UTC) - timedelta(hours=3),
        message="Refuse a total over no items",
        files=(FileChangeRecord("shop/pricing.js", None, 2, 1, hunks=((2, 1, 2, 2),)),),
        parents=("e" * 40,),
    )
    sources_services.ingest_commits(target, [record], Origin("api"))
    return sha


def figures(version: str, route: str) -> tuple[int, int]:
    totals = RouteMinute.objects.filter(
        release__service__name=SERVICE, release__version=version, route=route
    ).aggregate(requests=Sum("requests"), errors=Sum("errors"))
    return totals["requests"], totals["errors"]


def test_node_sdk_spans_make_an_error_group_with_its_route_and_suspect(tmp_path: Path) -> None:
    (tmp_path / "shop").mkdir()
    pricing = tmp_path / "shop" / "pricing.js"
    pricing.write_text(PRICING)
    shop = Service.objects.create(name=SERVICE, slug=SERVICE)
    _, token = sources_services.create_token("otel of shop-node", shop)
    now = datetime.now(UTC)
    before = release(shop, "2.0.0", now - timedelta(days=2))
    after = release(shop, "2.1.0", now - timedelta(hours=1))
    sha = culprit_commit(after)
    with LiveSite(tmp_path / "logs", {"DETECTIVE_API_TOKEN": API_KEY}, workers=0) as site:
        assert export(site, token, "2.0.0", pricing, failing=False) == 180
        assert export(site, token, "2.1.0", pricing, failing=True) == 180
        drilled = drill(site, "2.1.0")
        assert drill(site, "2.0.0")["error_groups"] == []

    # The release's figures, per route, from Node's SERVER spans.
    assert figures("2.0.0", CART) == (60, 0)
    assert figures("2.1.0", CART) == (60, 10)
    assert figures("2.1.0", "GET /products") == (60, 0)
    assert figures("2.1.0", "GET /health") == (60, 0)

    # The error group: Node's exception type, its frame in the service's own file.
    group = ErrorGroup.objects.get(service=shop)
    assert group.exception_type == "RangeError"
    # Node names a function called on its module's exports `Object.lineTotal`.
    assert group.frames[-1][0].endswith("shop/pricing.js")
    assert group.frames[-1][1:] == [3, "Object.lineTotal"]
    assert "RangeError: cannot split 12.5 over 0 items" in group.stacktrace
    assert group.first_release_id == after.pk
    assert len(ErrorRelease.objects.get(release=after).exemplars) == 5
    assert not ErrorRelease.objects.filter(release=before).exists()

    [new] = drilled["error_groups"]
    assert (new["status"], new["exception_type"], new["count"]) == ("new", "RangeError", 10)
    assert new["routes"] == {CART: 10}
    assert new["suspect"]["sha"] == sha
    cart = next(r for r in drilled["routes"] if r["route"] == CART)
    assert (cart["release"]["requests"], cart["release"]["errors"]) == (60, 10)
    assert cart["release"]["p95_ms"] is not None

    evidence = " ".join(judge_release(after).verdict.evidence())
    assert (
        "RangeError in shop/pricing.js `Object.lineTotal`: 10 of 60 requests of "
        "GET /cart/{cart_id}/total since 2.1.0 (none before); new in this release"
    ) in evidence, evidence
    assert f"first suspect {sha[:7]} 'Refuse a total over no items' (Rui Costa)" in evidence
