"""Two release managers on the desk, for real (issue 37, item 10): Chromium against a live site.
The report waits a second time: the card says how the first was decided and what moved since.
One overrides a waiting report to High on their screen; the other's desk, never reloaded, shows
the counted severity go from Medium to High, the pipeline line change from "waiting" to
"told", the decision in the report's box and the waiting count drop, within the desk's poll.

Set DETECTIVE_SCREENSHOTS=<dir> to keep the second desk at 1280 and 390 px, before and after.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from playwright.sync_api import Browser, expect

from releases.models import Release, RiskReport, Service
from review import services as review_services
from tests.browser.chromium import DESKTOP, log_in, password_hash, screenshots
from tests.live_site import LiveSite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def site(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    with LiveSite(tmp_path_factory.mktemp("desk-site"), {}, workers=0) as live:
        yield live


def manager(django_user_model: type[User], name: str) -> User:
    user = django_user_model.objects.create(username=name, password=password_hash())
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["review_report", "view_release", "view_riskreport"]
        )
    )
    return user


def failed_tests(count: int) -> list[dict[str, object]]:
    return [{"name": "failed_tests", "label": "Failed tests", "level": "medium" if count else
             "none", "critical": False, "figure": count}]  # fmt: skip


def waiting_report(decider: User) -> RiskReport:
    """itsdangerous 2.2.0, asked again: its first report (no failing test) was accepted at Low
    yesterday; now the model filed low, the policy medium (5 failed tests); a pipeline waits."""
    service = Service.objects.create(name="itsdangerous", slug="itsdangerous")
    release = Release.objects.create(service=service, version="2.2.0", title="Signer keys")
    first = RiskReport.objects.create(
        release=release, severity="low", policy_severity="low", findings=["0 failed tests"],
        signals=failed_tests(0), needs_review=True,
        filed_at=timezone.now() - timedelta(days=1),
    )  # fmt: skip
    review_services.decide_report(first, decider, decision="accept", severity="low", reason="")
    return RiskReport.objects.create(
        release=release,
        severity="low",
        policy_severity="medium",
        findings=["5 failed tests in tests/test_signer.py"],
        signals=failed_tests(5),
        needs_review=True,
        review_reasons=["severity low is below the policy's medium: 5 failed tests"],
        pipeline_waiting_since=timezone.now(),
    )


def test_a_decision_on_one_screen_reaches_the_other_without_a_reload(
    site: LiveSite, browser: Browser, django_user_model: type[User]
) -> None:
    ada = manager(django_user_model, "ada")
    manager(django_user_model, "grace")
    report = waiting_report(ada)
    watching = browser.new_context(base_url=site.url, viewport=DESKTOP).new_page()
    deciding = browser.new_context(base_url=site.url, viewport=DESKTOP).new_page()
    log_in(watching, "ada", "/review/")
    log_in(deciding, "grace", "/review/")

    item = watching.locator(f"#queue-item-{report.pk}")
    expect(item.locator("h2")).to_contain_text("itsdangerous 2.2.0")
    expect(watching.locator(f"#counts-{report.pk}")).to_contain_text("Medium")
    expect(watching.locator(f"#pipeline-{report.pk}")).to_contain_text("Pipeline waiting")
    earlier = item.locator(".rv-earlier")
    expect(earlier).to_contain_text("Asked again.")
    expect(earlier).to_contain_text("accepted at Low by ada")
    expect(earlier).to_contain_text("Failed tests: 0 → 5 (none → medium)")
    screenshots(watching, "desk-before")
    watching.evaluate("window.notReloaded = true")

    box = deciding.locator(f"#review-{report.pk}")
    box.locator("select[name=severity]").select_option("high")
    box.locator("textarea[name=reason]").fill("Five signer tests fail: not a release to ship.")
    box.get_by_role("button", name="Override").click()
    expect(deciding.locator(f"#counts-{report.pk}")).to_contain_text("High")

    # The other desk: within two polls (5 s each), nothing reloaded.
    expect(watching.locator(f"#counts-{report.pk}")).to_contain_text("High", timeout=15_000)
    expect(watching.locator(f"#pipeline-{report.pk}")).to_contain_text("Pipeline told")
    expect(watching.locator(f"#review-{report.pk}")).to_have_attribute(
        "data-review-state", "override"
    )
    expect(watching.locator(f"#review-{report.pk}")).to_contain_text("by grace")
    expect(watching.locator("#review-count .stat-value")).to_have_text("0")
    assert watching.evaluate("window.notReloaded") is True
    screenshots(watching, "desk-after")
