"""The release manager's desk in a real browser: Chromium (Playwright) against a live site
(daphne, as `manage.py up` runs it, on the test database).

- The review queue at desktop width: a report marked for review is accepted; another, whose
  verdict changed, is overridden (refused first without a reason), and the override is exported
  as an eval scenario that `run_evals` then runs with the scripted eval agent.
- The release page at phone width: a needs-review report accepted where it is shown.

Set DETECTIVE_SCREENSHOTS=<dir> to keep screenshots of the pages at desktop and phone widths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import respx
from django.contrib.auth.models import Permission, User
from django.db import connections
from django.test import override_settings
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from evals.scenario import load_suite
from releases.models import Release, ReviewDecision, RiskReport
from tests.browser.chromium import DESKTOP, PHONE, log_in, password_hash, screenshots
from tests.eval_agents import ScriptedAgent
from tests.live_site import LiveSite
from tests.review_scenario_run_test import run_review_scenarios

T = TypeVar("T")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("review-scenarios")


@pytest.fixture(scope="module")
def site(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory, exports: Path
) -> Iterator[LiveSite]:
    environment = {"DETECTIVE_REVIEW_SCENARIOS": str(exports)}
    with LiveSite(tmp_path_factory.mktemp("review-site"), environment, workers=0) as live:
        yield live


@pytest.fixture
def manager(django_user_model: type[User]) -> User:
    """A release manager who may review. (Permissions, not the group: a transactional test's
    flush removes the group its data migration made.)"""
    user = django_user_model.objects.create(username="rm", password=password_hash())
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["review_report", "view_release", "view_riskreport"]
        )
    )
    return user


def off_thread(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `call` on a thread of its own: Playwright's sync API marks this thread's loop as
    running, where run_evals' asyncio.run is refused."""

    def run() -> T:
        try:
            return call(*args, **kwargs)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result(timeout=120)


def needs_review(make_release: Callable[..., Release], version: str) -> RiskReport:
    release = make_release(version, title="Refund rounding")
    return RiskReport.objects.create(
        release=release,
        severity="medium",
        policy_severity="high",
        summary="One refund test fails; metrics are calm.",
        findings=["1 failing test: test_refund_partial", "Error rate 0.4 %", "Metrics stable"],
        grounding=[
            {
                "where": "findings[0]",
                "text": "1 failing test: test_refund_partial",
                "evidence": ["test_refund_partial is listed as failing"],
                "problems": [],
                "signals": ["critical_area_failures"],
                "grounded": True,
                "verdict": "found",
                "label": "figures found in the data",
            },
            {
                "where": "findings[2]",
                "text": "Metrics stable",
                "evidence": [],
                "problems": [
                    "it says the metrics are stable, but the policy reads: Error rate "
                    "7.1 %, above the 5 % limit for high"
                ],
                "signals": ["error_rate"],
                "grounded": False,
                "verdict": "contradicts",
                "label": "contradicts the data",
            },
            {
                "where": "findings[1]",
                "text": "Error rate 0.4 %",
                "evidence": [],
                "problems": ["0.4 % is not in the data"],
                "signals": [],
                "grounded": False,
            },
        ],
        signals=[
            {
                "name": "critical_area_failures",
                "label": "Failed tests in a critical area",
                "level": "high",
                "critical": True,
                "figure": 1,
                "threshold": "high from 1 failing test in payments, auth, security, data",
                "detail": "1 failing test in payments: test_refund_partial",
                "needs_review": False,
                "areas": ["payments"],
            },
            {
                "name": "error_rate",
                "label": "Error rate",
                "level": "none",
                "critical": True,
                "figure": 0.01,
                "threshold": "high above 5 %; medium from 2 % up to and including 5 %",
                "detail": "Error rate 1 %, below the 2 % limit for medium",
                "needs_review": False,
                "areas": [],
            },
        ],
        needs_review=True,
        review_reasons=["The model filed medium; the policy says high."],
    )


def changed_verdict(make_release: Callable[..., Release], version: str) -> RiskReport:
    release = make_release(version, title="Saved cards")
    now = timezone.now()
    RiskReport.objects.create(
        release=release, severity="low", findings=["Docs only"], filed_at=now - timedelta(days=1)
    )
    return RiskReport.objects.create(
        release=release,
        severity="high",
        findings=["Card vault migration"],
        summary="The card vault moved.",
        filed_at=now,
    )


def open_page(browser: Browser, site: LiveSite, viewport: dict[str, int]) -> Page:
    page = browser.new_context(base_url=site.url, viewport=viewport).new_page()
    page.set_default_timeout(15_000)
    return page


def test_accept_override_and_export_from_the_review_queue(
    site: LiveSite,
    browser: Browser,
    manager: User,
    make_release: Callable[..., Release],
    exports: Path,
) -> None:
    accepted = needs_review(make_release, "v8.1.0")
    overridden = changed_verdict(make_release, "v8.2.0")
    page = open_page(browser, site, DESKTOP)
    try:
        log_in(page, manager.username, "/")
        expect(page.locator("#review-card .stat-value")).to_have_text("2")
        expect(page.locator("#severity-trend svg")).to_be_visible()
        screenshots(page, "home")
        page.locator("#review-card").click()
        page.wait_for_url("**/review/")
        first = page.locator(f"#queue-item-{accepted.pk}")
        second = page.locator(f"#queue-item-{overridden.pk}")
        # The queue leads with what was marked for review, with the evidence beside it.
        expect(page.locator(".rv-item").first).to_have_id(f"queue-item-{accepted.pk}")
        expect(first).to_contain_text("The model filed medium; the policy says high.")
        expect(first.locator(".rv-flag-absent")).to_have_text("not in the data")
        expect(first.locator(".rv-proof")).to_contain_text("test_refund_partial")
        expect(second).to_contain_text("Low → High")
        screenshots(page, "review-queue")

        expect(first.locator(".rv-flag-contradicts")).to_have_text("contradicts the data")
        expect(page.locator("#review-count .stat-value")).to_have_text("2")
        # Both verdicts are one click away; siding with the policy needs no reason.
        expect(first.get_by_role("button", name="Accept the model's Medium")).to_be_visible()
        first.get_by_role("button", name="Accept the policy's High").click()
        expect(first.locator(".rv-decision")).to_contain_text("accepted the policy's")
        expect(first.locator(".rv-decision")).to_contain_text("by rm")
        # The report shows the decision, and the count follows it without a reload.
        expect(first.locator(".rv-decided-note")).to_contain_text("decided")
        expect(first.locator(".rv-reasons")).to_have_count(0)
        expect(page.locator("#review-count .stat-value")).to_have_text("1")

        # An override needs a reason: refused, the form kept, nothing recorded.
        second.locator('select[name="severity"]').select_option("medium")
        second.get_by_role("button", name="Override").click()
        expect(second.locator(".alert-error")).to_contain_text("an override needs a reason")
        second.locator('textarea[name="reason"]').fill("The migration ran in staging for a week.")
        second.locator('select[name="wrong_finding"]').select_option(label="Card vault migration")
        second.get_by_role("button", name="Override").click()
        expect(second.locator(".rv-decision")).to_contain_text("overridden to")
        expect(page.locator("#review-count .stat-value")).to_have_text("0")
        expect(second.locator(".rv-reason")).to_have_text(
            "The migration ran in staging for a week."
        )
        decision = ReviewDecision.objects.get(report=overridden)
        assert (decision.severity, decision.reviewer) == ("medium", manager)
        assert decision.wrong_finding == "Card vault migration"
        assert ReviewDecision.objects.get(report=accepted).severity == "high"
        screenshots(page, "review-decided")

        second.get_by_role("button", name="Export as eval scenario").click()
        expect(second.locator(".rv-export")).to_contain_text("run_evals")
        decision.refresh_from_db()
        expect(second.locator(".rv-export code").first).to_have_text(decision.scenario_id)
        assert (exports / f"{decision.scenario_id}.toml").is_file()

        # The desk keeps the decisions, who and why.
        page.goto("/review/?tab=decided")
        decided = page.locator(f"#decision-{decision.pk}")
        expect(decided).to_contain_text("overridden")
        expect(decided).to_contain_text("rm")
        expect(decided).to_contain_text("The migration ran in staging for a week.")
        screenshots(page, "review-decided-tab")

        page.goto("/releases/")
        row = page.locator("tr", has=page.locator('a[href="/releases/v8.2.0/"]'))
        expect(row.locator(".badge")).to_have_text("Medium")
        expect(row.locator(".rv-mark")).to_have_text("decided (overridden)")
        screenshots(page, "release-list-decided")
        page.goto("/releases/v8.2.0/")
        expect(page.locator("h1")).to_contain_text("Medium risk")
        expect(page.locator("h1 .rv-mark")).to_have_text("decided (overridden)")
        expect(page.locator(".rv-history")).to_contain_text("The migration ran in staging")
        screenshots(page, "release-overridden")
        page.goto("/review/")
        expect(page.locator(".rv-item")).to_have_count(0)
    finally:
        page.context.close()

    # The exported label runs as a scenario of the suite.
    suite = load_suite(extra_dirs=[exports])
    with (
        override_settings(DETECTIVE_REVIEW_SCENARIOS_DIR=exports),
        respx.mock(assert_all_called=False) as router,
    ):
        run, _ = off_thread(run_review_scenarios, router, ScriptedAgent(suite=suite))
    (result,) = run.results.all()
    assert result.scenario_id == decision.scenario_id
    assert result.passed, result.scores


def test_accept_on_the_release_page_at_phone_width(
    site: LiveSite, browser: Browser, manager: User, make_release: Callable[..., Release]
) -> None:
    report = needs_review(make_release, "v8.3.0")
    page = open_page(browser, site, PHONE)
    try:
        log_in(page, manager.username, "/releases/v8.3.0/")
        card = page.locator("section.report")
        expect(card.locator(".rv-reasons")).to_contain_text("the policy says high")
        expect(card.locator(".rv-verdicts")).to_contain_text("Policy")
        card.locator(".rv-signals summary").click()
        expect(card.locator(".rv-signal-table")).to_contain_text("high from 1 failing test")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the page scrolls sideways: {width} px"
        screenshots(page, "release-needs-review")
        card.get_by_role("button", name="Accept the model's Medium").click()
        expect(card.locator(".rv-decision")).to_contain_text("accepted the model's")
        expect(card.locator(".rv-reasons")).to_have_count(0)
        assert ReviewDecision.objects.get(report=report).reviewer == manager
        page.reload()
        expect(page.locator("h1 .rv-mark")).to_have_text("decided (accepted)")
        screenshots(page, "release-decided")
    finally:
        page.context.close()


def test_the_release_list_sorts_by_header_and_on_a_phone_by_select(
    site: LiveSite, browser: Browser, manager: User, make_release: Callable[..., Release]
) -> None:
    make_release("v5.0.0", deployment_metrics={"error_rate": 0.004, "response_time_p95": 200})
    make_release("v5.1.0", deployment_metrics={"error_rate": 0.09, "response_time_p95": 250})
    make_release("v5.2.0", deployment_metrics={"error_rate": 0.03, "response_time_p95": 900})
    page = open_page(browser, site, DESKTOP)
    versions = page.locator("#release-table a.version")
    try:
        log_in(page, manager.username, "/releases/")
        page.locator('a.sort-link[data-sort="error_rate"]').click()
        expect(versions).to_have_text(["v5.1.0", "v5.2.0", "v5.0.0"])
        assert page.url.endswith("?sort=-error_rate")
        page.locator('a.sort-link[data-sort="error_rate"]').click()  # again: the other way
        expect(versions).to_have_text(["v5.0.0", "v5.2.0", "v5.1.0"])
        screenshots(page, "release-list-sorted")
        page.set_viewport_size(PHONE)
        page.locator("#release-sort").select_option("-p95")
        expect(versions).to_have_text(["v5.2.0", "v5.1.0", "v5.0.0"])
        # The filters keep the sort.
        page.get_by_label("Search releases by version, title or change").fill("v5.")
        expect(versions).to_have_text(["v5.2.0", "v5.1.0", "v5.0.0"])
        expect(page.locator("#release-sort")).to_have_value("-p95")
    finally:
        page.context.close()


def test_a_second_manager_deciding_the_same_report_is_told_who_decided_first(
    site: LiveSite,
    browser: Browser,
    manager: User,
    django_user_model: type[User],
    make_release: Callable[..., Release],
) -> None:
    """Issue 37: two release managers with the same report open; the one who clicks second
    gets the 409's message in the box (who decided, when), and nothing of theirs is stored."""
    report = needs_review(make_release, "v8.3.0")
    other = django_user_model.objects.create(username="rm2", password=password_hash())
    other.user_permissions.set(manager.user_permissions.all())
    first, second = (open_page(browser, site, DESKTOP) for _ in range(2))
    try:
        log_in(first, manager.username, "/review/")
        log_in(second, other.username, "/review/")
        for page in (first, second):
            expect(page.locator(f"#review-{report.pk} .rv-accept-policy")).to_be_visible()
        first.locator(f"#review-{report.pk} .rv-accept-policy").click()
        expect(first.locator(f"#review-{report.pk}")).to_have_attribute(
            "data-review-state", "accept"
        )
        second.locator(f"#review-{report.pk} .rv-accept-model").click()
        conflict = second.locator(f"#decision-conflict-{report.pk}")
        expect(conflict).to_contain_text("Already decided by rm at ")
        expect(second.locator(f"#review-{report.pk}")).to_have_attribute(
            "data-review-state", "accept"
        )
        screenshots(second, "review-conflict")
        assert list(ReviewDecision.objects.values_list("reviewer__username", "severity")) == [
            ("rm", "high")
        ]
    finally:
        first.context.close()
        second.context.close()
