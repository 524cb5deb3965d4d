"""The release page in a real browser when new data came in after a person's decision: it
says that the decision was about the earlier data, at desktop and phone widths (the notice
fits the phone's width). Set DETECTIVE_SCREENSHOTS=<dir> to keep the screenshots."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import Permission, User
from playwright.sync_api import Browser, expect

from assessments import filing
from assessments import services as run_services
from releases.models import Conversation, Release, RunStatus
from review import services as review_services
from tests.browser.chromium import DESKTOP, PHONE, log_in, password_hash, screenshots
from tests.live_site import LiveSite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    with LiveSite(tmp_path_factory.mktemp("earlier-data-site"), {}, workers=0) as live:
        yield live


def test_the_page_says_the_decision_was_about_earlier_data(
    browser: Browser,
    site: LiveSite,
    make_release: Callable[..., Release],
    django_user_model: type[User],
) -> None:
    manager = django_user_model.objects.create(username="rm", password=password_hash())
    manager.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["review_report", "view_release", "view_riskreport", "run_assessment"]
        )
    )
    release = make_release(version="v5.1.0", title="Checkout rewrite")
    run = run_services.start_assessment(release, manager)
    Conversation.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    run.refresh_from_db()
    report = filing.file_risk_report(
        release=release,
        severity="high",
        findings=["The checkout error rate tripled after the deploy"],
        summary="Errors tripled in checkout.",
        conversation=run,
    )
    review_services.decide_report(
        report, manager, decision="override", severity="medium", reason="ok"
    )
    # A new test report since: the figures the decision judged are not the release's now.
    Release.objects.filter(pk=release.pk).update(
        test_results={"passed": 8, "failed": 2, "skipped": 1, "failing_tests": ["test_pay"]}
    )
    for size in (DESKTOP, PHONE):
        page = browser.new_context(base_url=site.url, viewport=size).new_page()
        log_in(page, "rm", release.get_absolute_url())
        notice = page.locator("#earlier-data")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text(
            "The decision by rm (overridden to medium) was about the earlier data"
        )
        expect(notice).to_contain_text("Reassess to judge what the release has now.")
        box = notice.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= size["width"]
        if size is DESKTOP:
            screenshots(page, "release-decision-earlier-data")
        page.context.close()
