"""The release page in a real browser for a report whose model left out part of the policy's
evidence: the policy's sentences are in the report, each marked "from the policy", at desktop
and phone widths (the flag fits the phone's width). Set DETECTIVE_SCREENSHOTS=<dir> to keep
the screenshots."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import Permission, User
from playwright.sync_api import Browser, expect

from assessments import filing
from assessments import services as run_services
from releases.models import Conversation, Release, RunStatus
from tests.browser.chromium import DESKTOP, PHONE, log_in, password_hash, screenshots
from tests.live_site import LiveSite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    with LiveSite(tmp_path_factory.mktemp("policy-findings-site"), {}, workers=0) as live:
        yield live


def test_the_policys_sentences_the_model_left_out_are_marked_on_the_release_page(
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
    release = make_release(
        version="v5.2.0",
        title="Checkout rewrite",
        changes=["Rewrite payment capture on the new PSP client", "Update button styles"],
        test_results={
            "passed": 118,
            "failed": 2,
            "skipped": 1,
            "failing_tests": ["test_refund_idempotency_key_reuse", "test_capture_<b>retry</b>"],
        },
        deployment_metrics={"error_rate": 0.064, "response_time_p95": 540},
    )
    run = run_services.start_assessment(release, manager)
    Conversation.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    run.refresh_from_db()
    checked = filing.file_checked_report(
        release=release,
        severity="high",
        findings=["Error rate 6.4 % after the deploy, above the 5 % limit"],
        summary="Errors rose after the payment rewrite.",
    )
    report = checked.report
    assert report is not None and len(report.policy_findings) >= 2
    for size in (DESKTOP, PHONE):
        page = browser.new_context(base_url=site.url, viewport=size).new_page()
        log_in(page, "rm", release.get_absolute_url())
        flags = page.locator(".rv-finding-policy .rv-flag-policy")
        expect(flags).to_have_count(len(report.policy_findings))
        for n, sentence in enumerate(report.policy_findings):
            finding = page.locator(".rv-finding-policy").nth(n)
            expect(finding).to_contain_text(sentence)
            expect(finding.locator(".rv-flag-policy")).to_have_text("from the policy")
            box = finding.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= size["width"]
        # The model's own finding carries no such flag.
        model = page.locator(".rv-finding").first
        expect(model).to_contain_text("Error rate 6.4 % after the deploy")
        expect(model.locator(".rv-flag-policy")).to_have_count(0)
        # It is marked as the model's own, as its summary is (issue 40).
        expect(model.locator(".rv-flag-own")).to_have_text("the model's own")
        expect(page.locator(".rv-flag-own")).to_have_count(2)
        if size is DESKTOP:
            screenshots(page, "release-policy-findings")
        page.context.close()
