"""No table cuts a column (issue 37, item 10): at 1280 and at 390 px, every table on the site's
pages fits its container (its scrollWidth is not past its clientWidth), unless the container
is a horizontal scroll box made for a table that must be wide (`.table-scroll`, which says so).

The data is the phone test's (the demo, a release of long identifiers, an eval run), plus a
webhook's deliveries with a long error (the admin's deliveries list) and a decision (the
desk's decided tab). The user is a superuser, so every column and action is shown.

Set DETECTIVE_SCREENSHOTS=<dir> to keep each page's screenshots at 1280 and 390 px.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from playwright.sync_api import Browser, Page

from releases.models import RiskReport
from review import services as review_services
from tests.browser.chromium import DESKTOP, PHONE, log_in, screenshots
from tests.browser.phone_test import LONG_TEST, _pages
from tests.live_site import LiveSite
from webhooks.models import WebhookDelivery, WebhookEndpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# What a table's container may do: scroll sideways, when it says it holds a table that must be
# wide; on a phone, also the admin's change list (Django's own scroll box, `div.results`: eight
# columns of a log do not fit 390 px, and a card per row would be another admin).
WIDE_TABLE_BOXES = {"1280": ["table-scroll"], "390": ["table-scroll", "results"]}


@pytest.fixture(scope="module")
def site(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    with LiveSite(tmp_path_factory.mktemp("tables-site"), {}, workers=0) as live:
        yield live


def _more_pages(django_user_model: type[User]) -> dict[str, str]:
    try:
        pages = _pages(django_user_model)
        endpoint = WebhookEndpoint.objects.create(
            name="release-bot", url="https://hooks.example.com/detective", secret="s" * 32
        )
        for attempt in range(1, 4):
            WebhookDelivery.objects.create(
                endpoint=endpoint,
                event="verdict.decided",
                service="payments-gateway-europe",
                version="v12.34.5678-release-candidate.20261124",
                attempt=attempt,
                status_code=503,
                error=f"503 Service Unavailable from the receiver: {LONG_TEST}",
                duration_ms=30012,
            )
        report = RiskReport.objects.filter(needs_review=True).order_by("pk").first()
        assert report is not None
        admin = django_user_model.objects.get(username="admin-with-a-long-name")
        review_services.decide_report(
            report, admin, decision="override", severity="high", reason=f"{LONG_TEST} again"
        )
        return {
            **pages,
            "review-decided": "/review/?tab=decided",
            "admin-deliveries": "/admin/webhooks/webhookdelivery/",
            "admin-endpoints": "/admin/webhooks/webhookendpoint/",
            "admin-releases": "/admin/releases/release/",
        }
    finally:
        connections.close_all()


@pytest.fixture
def pages(django_user_model: type[User]) -> dict[str, str]:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_more_pages, django_user_model).result(timeout=180)


def cut_tables(page: Page, wide: list[str]) -> list[dict[str, Any]]:
    """The visible tables wider than their container, where it is not a wide table's box."""
    return page.evaluate(
        """(wide) => [...document.querySelectorAll('table')]
            .filter(t => t.offsetParent !== null)
            .map(t => ({t, box: t.parentElement}))
            .filter(({box}) => box.scrollWidth > box.clientWidth + 1
                && !wide.some(name => box.classList.contains(name)))
            .map(({t, box}) => ({
                table: `${t.classList.value}`,
                box: `${box.tagName.toLowerCase()}.${box.classList.value.replaceAll(' ', '.')}`,
                scroll: box.scrollWidth,
                client: box.clientWidth,
                columns: [...(t.tHead ? t.tHead.rows[0].cells : [])].map(c => c.textContent.trim()),
            }))""",
        wide,
    )


def test_no_table_cuts_a_column_at_1280_or_390_px(
    site: LiveSite, browser: Browser, pages: dict[str, str]
) -> None:
    context = browser.new_context(base_url=site.url, viewport=DESKTOP)
    page = context.new_page()
    page.set_default_navigation_timeout(120_000)
    log_in(page, "admin-with-a-long-name", "/")
    cut: dict[str, list[dict[str, Any]]] = {}
    for name, path in pages.items():
        for label, size in (("1280", DESKTOP), ("390", PHONE)):
            page.set_viewport_size(size)
            page.goto(path)
            page.wait_for_load_state("networkidle")
            found = cut_tables(page, WIDE_TABLE_BOXES[label])
            if found:
                cut[f"{name} at {label}"] = found
        screenshots(page, f"tables-{name}")
    context.close()
    assert cut == {}, json.dumps(cut, indent=1)
