"""The release page's *Errors & traces* section in Chromium: drawn after the page loads, the new
error group first with its route, suspect-free frame and folded stack trace, then the routes;
at 390 px nothing is wider than the viewport. DETECTIVE_SCREENSHOTS=<dir> keeps the PNGs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser

from releases.models import Release, Service
from sources import services as sources_services
from sources.selectors import token_for
from tests.browser.chromium import DESKTOP, PHONE, log_in, password_hash, screenshots
from tests.live_site import LiveSite
from tests.otlp_requests import request, span
from traces import services
from traces.api_test import child
from traces.otlp.grouping_test import stack
from traces.otlp.spans import read_spans

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    with LiveSite(tmp_path_factory.mktemp("traces-site"), {}, workers=0) as live:
        yield live


def test_the_new_error_group_leads_the_section(browser: Browser, site: LiveSite) -> None:
    User.objects.create(
        username="manager", password=password_hash(), is_staff=True, is_superuser=True
    )
    shop = Service.objects.create(name="shop", slug="shop")
    now = time.time_ns() - 300 * 10**9
    release = Release.objects.create(
        service=shop,
        version="1.1.0",
        deployed_at=datetime.fromtimestamp(now / 1e9, UTC) - timedelta(minutes=2),
    )
    token = token_for(sources_services.create_token("otel", shop)[1])
    assert token is not None
    error = ("ZeroDivisionError", "float division by zero", stack())
    # One trace a request: each route's request its own trace id.
    spans = [
        span(3 * n + i, now + n * 10**7, route=route,
             exception=error if i == 0 and n % 6 == 0 else None)
        for n in range(60)
        for i, route in enumerate(("/cart/{cart_id}/total", "/products", "/health"))
    ]  # fmt: skip
    spans += [span(999, now - 200 * 10**9, route="/products", ms=35)]
    # The failing requests' own calls: their sample trace shows them under the request.
    failing = [s for s in spans if s.events]
    spans += [
        child(s, 2 * n, "SELECT shop.cart_line WHERE cart_id = $1", 1, 4)
        for n, s in enumerate(failing)
    ]
    spans += [child(s, 2 * n + 1, "POST pricing-service /v2/rates/lookup-with-a-long-name", 6, 12)
              for n, s in enumerate(failing)]  # fmt: skip
    services.ingest(token, read_spans(request("shop", "1.1.0", spans)))

    page = browser.new_page(base_url=site.url, viewport=DESKTOP)
    log_in(page, "manager", release.get_absolute_url())
    group = page.locator("#release-traces li[data-status=new]")
    group.wait_for(timeout=15_000)
    assert "ZeroDivisionError" in group.inner_text()
    assert "GET /cart/{cart_id}/total (10)" in group.inner_text()
    assert not page.locator("#release-traces details[open]").count()  # the stack is folded
    assert page.locator("#release-traces .trc-routes tbody tr").count() == 3
    # The sample trace, folded too; opened, its three spans, the request's failed.
    sample = group.locator("details.trc-sample")
    assert "3 spans" in sample.locator("summary").inner_text()
    sample.locator("summary").click()
    assert sample.locator(".trc-span").count() == 3
    assert "failed: ZeroDivisionError" in sample.locator(".trc-span-error").inner_text()
    page.set_viewport_size(PHONE)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], width
    screenshots(page, "release-traces")
    page.close()
