"""Every page on a phone: at 390 px no page is wider than the viewport, and the navigation fits.

The data is the demo's (`seed_demo`: its releases, reports and demo run) plus what makes pages
wide: a release whose failing tests, changes and version are long identifiers without spaces,
a report on it that needs review, and an eval run with a regression and trials that have
transcripts. The user is a superuser, so every tab and action is shown.

Set DETECTIVE_SCREENSHOTS=<dir> to keep each page's screenshots at 1280 and 390 px.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connections
from playwright.sync_api import Browser, Page

from assessments import filing, tasks
from assessments import services as run_services
from assessments.management.commands import seed_demo
from evals.models import EvalResult
from releases import services
from releases.models import Conversation, Release, RunStatus
from tests.browser.chromium import PHONE, log_in, password_hash, screenshots
from tests.eval_data import make_run, suite
from tests.live_site import LiveSite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_TEST = (
    "tests/integration/payments/refunds/test_partial_refund_with_mixed_currency_rounding"
    "_and_saved_cards_across_regions"
)
LONG_VERSION = "v12.34.5678-release-candidate.20261124+build.8c1f2e9a7b"


@pytest.fixture(scope="module")
def site(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    with LiveSite(tmp_path_factory.mktemp("phone-site"), {}, workers=0) as live:
        yield live


@pytest.fixture
def pages(django_user_model: type[User]) -> dict[str, str]:
    """The site's pages, by name, over the data above. Made on a thread of its own: Playwright's
    sync API marks this thread's loop as running, where publishing eval progress is refused."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_make_pages, django_user_model).result(timeout=120)


def _make_pages(django_user_model: type[User]) -> dict[str, str]:
    try:
        return _pages(django_user_model)
    finally:
        connections.close_all()


def _pages(django_user_model: type[User]) -> dict[str, str]:
    django_user_model.objects.create(
        username="admin-with-a-long-name",
        password=password_hash(),
        is_staff=True,
        is_superuser=True,
    )
    call_command("seed_demo", stdout=io.StringIO())
    long = services.create_release(
        version=LONG_VERSION,
        title="Refunds: partial refunds across currencies, saved cards and regions",
        changes=[f"Refactored {LONG_TEST.replace('/', '.')}", "Bumped payments-sdk to 9.12.0"],
        test_results={
            "passed": 812,
            "failed": 2,
            "skipped": 4,
            "failing_tests": [LONG_TEST, LONG_TEST + "_again"],
        },
        deployment_metrics={"error_rate": 0.031, "response_time_p95": 1840},
    )
    filing.file_checked_report(
        release=long,
        severity="low",
        findings=[f"1 failing test: {LONG_TEST}", "Error rate 0.4 %"],
        summary=f"{LONG_TEST} fails; the model thinks it is flaky.",
    )
    # A finished run on it, its timeline and tool results carrying the long names.
    seed_demo.Command()._demo_run(long)
    scenarios = [suite().get(i) for i in ("high_payment_failures", "summary_http_500")]
    make_run(scenarios=scenarios, trials=1, baseline=True, conversations=True)
    run = make_run(
        {"high_payment_failures": ["failed"], "summary_http_500": ["errored"]},
        scenarios=scenarios,
        trials=1,
        conversations=True,
    )
    trial = EvalResult.objects.filter(run=run).exclude(conversation=None).first()
    assert trial is not None
    demo_run = Conversation.objects.get(metadata__demo=True, release__version="v2.1.0")
    long_run = Conversation.objects.get(release=long, metadata__demo=True)
    failed = run_services.start_assessment(long, None, enqueue=tasks.enqueue_assessment)
    Conversation.objects.filter(pk=failed.pk).update(
        status=RunStatus.FAILED, error="The model server did not answer within 30 s."
    )
    return {
        "home": "/",
        "releases": "/releases/",
        "release": f"/releases/{Release.objects.get(version=LONG_VERSION).version}/",
        "demo-release": "/releases/v2.1.0/",
        # The release's detail as ingested: its failing tests (the default), commits, metrics.
        "release-tests": "/releases/v2.3.0/?status=all",
        "release-commits": "/releases/v2.0.0/?tab=commits",
        "release-metrics": "/releases/v2.3.0/?tab=metrics",
        "service-release": "/services/search-api/releases/v1.5.0/",
        "run": f"/runs/{demo_run.pk}/",
        "long-run": f"/runs/{long_run.pk}/",
        "failed-run": f"/runs/{failed.pk}/",
        "missing-data": "/releases/v2.5.0-rc2/",
        "review": "/review/",
        "evals": "/evals/",
        "eval-run": f"/evals/runs/{run.pk}/",
        "compare": f"/evals/compare/{run.pk}/",
        "trial": f"/runs/{trial.conversation_id}/",
    }


def overflow(page: Page) -> dict[str, Any]:
    """The page's width and the viewport's, and the widest element's right edge."""
    return page.evaluate(
        """() => ({
            scroll: document.documentElement.scrollWidth,
            viewport: window.innerWidth,
            nav: Math.max(0, ...[...document.querySelectorAll('.topbar a, .topbar button')]
                .map(e => Math.ceil(e.getBoundingClientRect().right))),
            // The innermost elements past the right edge: what to fix.
            past: [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
                .filter(e => ![...e.children].some(
                    c => c.getBoundingClientRect().right > window.innerWidth + 0.5))
                .slice(0, 4)
                .map(e => `${e.tagName.toLowerCase()}.${e.classList.value.replaceAll(' ', '.')}`
                    + ` "${(e.textContent || '').trim().slice(0, 30)}"`),
        })"""
    )


def test_every_page_fits_a_phone(site: LiveSite, browser: Browser, pages: dict[str, str]) -> None:
    context = browser.new_context(base_url=site.url, viewport=PHONE)
    page = context.new_page()
    # The metrics tab's first request imports scipy.stats (the metric judge): seconds, and
    # tens of seconds on a busy machine where Python may not cache bytecode
    # (PYTHONDONTWRITEBYTECODE).
    page.set_default_navigation_timeout(120_000)
    page.goto("/accounts/login/")
    too_wide = {}
    widths = overflow(page)
    if widths["scroll"] > PHONE["width"]:
        too_wide["login"] = widths
    screenshots(page, "phone-login")
    log_in(page, "admin-with-a-long-name", "/")
    for name, path in pages.items():
        page.set_viewport_size(PHONE)
        page.goto(path)
        page.wait_for_load_state("networkidle")
        widths = overflow(page)
        if widths["scroll"] > PHONE["width"] or widths["nav"] > PHONE["width"]:
            too_wide[name] = widths
        screenshots(page, f"phone-{name}")
    context.close()
    assert too_wide == {}, f"wider than {PHONE['width']} px: {too_wide}"
