"""A run that investigated, on its page in a real browser: the four drill-downs are steps
with their results readable (the lines in front first), the release's hostile text shown as
text, and the page fits a phone.

Set DETECTIVE_SCREENSHOTS=<dir> to keep screenshots at desktop and phone widths.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, expect
from scipy import stats

from tests import drilldown_data
from tests.assessment_test import assess
from tests.browser.chromium import DESKTOP, PASSWORD, PHONE, log_in, screenshots
from tests.browser.phone_test import overflow
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DRILL_DOWNS = (
    "get_test_details",
    "get_code_changes",
    "get_metric_history",
    "get_observability_traces",
)


def test_the_drill_downs_are_steps_of_the_run_page(
    live_server: object, browser: Browser, django_user_model: type[User]
) -> None:
    assert stats.mannwhitneyu  # imported before the run (see drilldown_assessment_test.py)
    release = drilldown_data.build()
    with ScriptedLLM(mode="investigate") as llm:
        run = assess(release, llm.base_url)
    django_user_model.objects.create_superuser("viewer", "", PASSWORD)
    context = browser.new_context(base_url=str(live_server), viewport=DESKTOP)
    page = context.new_page()
    alerts: list[str] = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    log_in(page, "viewer", f"/runs/{run.pk}/")
    called = page.locator(".tl-tool-name")
    expect(called).to_have_text(["get_release_summary", *DRILL_DOWNS, "file_risk_report"])
    step = page.locator(".tl-tool").filter(
        has=page.locator(".tl-tool-name", has_text="get_test_details")
    )
    expect(step.get_by_text("known flaky").first).to_be_visible()
    expect(page.get_by_text("p95 latency rose from a median of").first).to_be_visible()
    # The traces tool's step: its lines in front name the new error group and its route.
    traces = page.locator(".tl-tool").filter(
        has=page.locator(".tl-tool-name", has_text="get_observability_traces")
    )
    expect(
        traces.get_by_text("new: KeyError in /srv/checkout/src/payments/refunds.py").first
    ).to_be_visible()
    expect(traces.get_by_text("GET /refunds: 4 errors of 20 requests").first).to_be_visible()
    # The failure message's markup is text on the page, never a tag or a script.
    expect(page.get_by_text("<script>alert(1)</script>", exact=False).first).to_be_attached()
    assert alerts == []
    screenshots(page, "drilldown-run")
    page.set_viewport_size(PHONE)
    page.reload()
    widths = overflow(page)
    assert widths["scroll"] <= PHONE["width"], widths
    context.close()
