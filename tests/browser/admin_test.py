"""The admin in a real browser: the eval run list fits a desktop, a run's results stay a
compact table, the comparison fits a phone, and the site has an icon.

Set DETECTIVE_SCREENSHOTS=<dir> to keep screenshots of the pages at desktop and phone widths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from releases.models import Release
from tests.browser.chromium import DESKTOP, PHONE, log_in, password_hash, screenshots
from tests.eval_data import make_run, suite
from tests.live_site import LiveSite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORSE = {"high_payment_failures": ["failed", "failed", "failed"]}


@pytest.fixture(scope="module")
def site(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    with LiveSite(tmp_path_factory.mktemp("admin-site"), {}, workers=0) as live:
        yield live


@pytest.fixture
def admin(django_user_model: type[User]) -> User:
    return django_user_model.objects.create(
        username="boss", password=password_hash(), is_staff=True, is_superuser=True
    )


def overflow(page: Page) -> int:
    """How many pixels the page, or a changelist's table in its box, scrolls sideways."""
    return int(
        page.evaluate(
            """Math.max(
              document.documentElement.scrollWidth - window.innerWidth,
              ...[...document.querySelectorAll(".results")].map(e => e.scrollWidth - e.clientWidth)
            )"""
        )
    )


def test_the_eval_admin_fits_desktop_and_phone(
    site: LiveSite, browser: Browser, admin: User
) -> None:
    scenarios = suite().scenarios[:12]
    make_run(scenarios=scenarios, baseline=True, conversations=True)
    worse = make_run(WORSE, scenarios=scenarios, conversations=True)
    page = browser.new_context(base_url=site.url, viewport=DESKTOP).new_page()
    try:
        log_in(page, admin.username, "/admin/evals/evalrun/")
        expect(page.locator("#result_list")).to_be_visible()
        assert overflow(page) <= 0, "the eval run list is wider than 1280 px"
        screenshots(page, "admin-evalrun-list")

        page.goto(f"/admin/evals/evalrun/{worse.pk}/change/")
        expect(page.locator("text=JSON").first).to_be_visible()
        height = page.evaluate("document.documentElement.scrollHeight")
        assert height < 8000, f"the run's change page is {height} px tall"  # 36 results
        screenshots(page, "admin-evalrun-change")

        page.set_viewport_size(PHONE)
        page.goto(f"/admin/evals/evalrun/{worse.pk}/compare/")
        expect(page.get_by_text("FAIL").first).to_be_visible()
        assert overflow(page) <= 0, "the admin comparison scrolls sideways on a phone"
        screenshots(page, "admin-compare")

        response = page.request.get("/favicon.ico")
        assert response.ok and "svg" in response.headers["content-type"]
    finally:
        page.context.close()


def test_the_review_decisions_admin_fits_and_exports(
    site: LiveSite, browser: Browser, admin: User, make_release: Callable[..., Release]
) -> None:
    from releases.models import RiskReport
    from review import services

    report = RiskReport.objects.create(
        release=make_release("v6.0.0"), severity="low", findings=["Docs only"]
    )
    decision = services.decide_report(
        report, admin, decision="override", severity="high", reason="The docs ship a migration."
    )
    page = browser.new_context(base_url=site.url, viewport=DESKTOP).new_page()
    try:
        log_in(page, admin.username, "/admin/releases/reviewdecision/")
        expect(page.locator("#result_list")).to_contain_text("The docs ship a migration.")
        assert overflow(page) <= 0, "the review decisions list is wider than 1280 px"
        screenshots(page, "admin-review-decisions")
        page.locator(f'input[name="_selected_action"][value="{decision.pk}"]').check()
        page.locator('select[name="action"]').select_option("export_scenarios")
        page.get_by_role("button", name="Go").click()
        expect(page.locator(".messagelist")).to_contain_text("Exported 1 scenario(s)")
        decision.refresh_from_db()
        assert decision.scenario_id == f"review_v6_0_0_{decision.pk}"
    finally:
        page.context.close()
