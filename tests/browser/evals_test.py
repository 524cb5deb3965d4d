"""The evals pages in a real browser: Chromium (Playwright) against a live site (daphne, as
`manage.py up` runs it, on the test database and channel layer).

- The compare page: log in, open the comparison of a deliberately worse run with the
  baseline, see the verdict on top and the regression row first, drill down to the
  transcripts of both runs.
- Live progress: the evals page of a run in progress updates its bar over the websocket when
  a trial is recorded, with no reload.

Set DETECTIVE_SCREENSHOTS=<dir> to keep screenshots of the pages at desktop and phone widths
(helpers and the browser fixture: tests/browser/chromium.py, conftest.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connections
from playwright.sync_api import Browser, WebSocket, expect

from evals import services
from evals.models import EvalRun
from tests.browser.chromium import DESKTOP, log_in, password_hash, screenshots
from tests.eval_data import make_run, suite, trial
from tests.live_site import LiveSite

T = TypeVar("T")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORSE = {"high_payment_failures": ["failed", "failed", "failed"]}


@pytest.fixture(scope="module")
def site(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    with LiveSite(tmp_path_factory.mktemp("evals-site"), {}, workers=0) as live:
        yield live


@pytest.fixture
def manager(django_user_model: type[User]) -> User:
    """A user who may see eval runs and change the baseline; a password the site accepts.
    (Permissions, not the Release managers group: a transactional test's flush removes the
    group its data migration made.)"""
    user = django_user_model.objects.create(username="evaluator", password=password_hash())
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_evalrun", "mark_baseline", "view_conversation"]
        )
    )
    return user


def off_thread(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `call` on a thread of its own: Playwright's sync API marks this thread's loop as
    running, where publishing to the channel layer (async_to_sync) is refused."""

    def run() -> T:
        try:
            return call(*args, **kwargs)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result(timeout=30)


def scenarios() -> list:
    ids = ("high_payment_failures", "low_clean_docs", "summary_http_500", "release_not_found")
    return [suite().get(i) for i in ids]


def test_the_compare_page_shows_the_verdict_and_the_regression(
    site: LiveSite, browser: Browser, manager: User
) -> None:
    baseline = off_thread(make_run, scenarios=scenarios(), baseline=True, conversations=True)
    worse = off_thread(make_run, WORSE, scenarios=scenarios(), conversations=True)
    context = browser.new_context(base_url=site.url, viewport=DESKTOP)
    page = context.new_page()
    try:
        log_in(page, manager.username, f"/evals/compare/{worse.pk}/?against=baseline")
        verdict = page.locator(".ev-verdict")
        expect(verdict).to_contain_text("FAIL")
        expect(verdict).to_contain_text(
            "Fails: 1 critical scenario regressed: high_payment_failures passed 3 of 3 before, "
            "0 of 3 now"
        )
        first_row = page.locator("table.ev-compare tbody tr").first
        expect(first_row).to_contain_text("high_payment_failures")
        expect(first_row.locator(".ev-change")).to_have_text("regression")
        expect(first_row).to_contain_text("\u2212100 pts")
        # Drill down: the trials of both runs, each a link to its transcript.
        first_row.locator("summary").click()
        links = first_row.get_by_role("link", name="transcript")
        expect(links).to_have_count(6)
        first_trial = worse.results.filter(scenario_id="high_payment_failures").first()
        assert first_trial is not None
        expect(first_row.locator(f'a[href="/runs/{first_trial.conversation_id}/"]')).to_be_visible()
        screenshots(page, "evals-compare")
        page.goto(f"/runs/{first_trial.conversation_id}/")
        expect(page.locator("h1 .ev-trial-verdict")).to_have_text("FAILED")
        expect(page.locator("#run-trial")).to_contain_text("severity acceptable")
        screenshots(page, "evals-trial-failed")

        page.goto(f"/evals/runs/{worse.pk}/")
        expect(page.locator("h1")).to_have_text(f"Eval run #{worse.pk}")
        screenshots(page, "evals-run")
        page.goto("/evals/")
        expect(page.locator(".ev-baseline-row")).to_contain_text(f"#{baseline.pk}")
        # The regressed run says so against the baseline, and the table fits 1280 px.
        expect(page.locator(".ev-verdict-badge-fail")).to_have_text("FAIL")
        hidden = page.evaluate(
            "Math.max(...[...document.querySelectorAll('.table-card, .card')]"
            ".map(e => e.scrollWidth - e.clientWidth))"
        )
        assert hidden <= 0, f"a card's content is {hidden} px wider than the card"
        screenshots(page, "evals-list")
    finally:
        context.close()


def test_a_run_in_progress_updates_live(site: LiveSite, browser: Browser, manager: User) -> None:
    chosen = scenarios()[:2]
    done = {s.id: ["passed"] for s in chosen}
    run = off_thread(make_run, done, scenarios=chosen, trials=2, finish=False)
    context = browser.new_context(base_url=site.url, viewport=DESKTOP)
    page = context.new_page()
    try:
        frames: list[str | bytes] = []

        def watch(socket: WebSocket) -> None:
            # Listening from the socket's creation: the state it sends on connecting may come
            # before any later wait for it would start.
            if f"/ws/evals/runs/{run.pk}/" in socket.url:
                socket.on("framereceived", lambda payload: frames.append(payload))

        page.on("websocket", watch)
        log_in(page, manager.username, "/evals/")
        bar = page.locator(f"#evalrun-progress-{run.pk}")
        expect(bar).to_contain_text("2 of 4 trials")
        deadline = time.monotonic() + 10
        while not frames:  # the state on connecting: the socket is in the run's group
            assert time.monotonic() < deadline, "the progress socket sent nothing"
            page.wait_for_timeout(50)
        off_thread(services.record_result, run, trial(chosen[0], 2, "failed"))
        expect(bar).to_contain_text("3 of 4 trials", timeout=10_000)
        expect(bar).to_contain_text("1 failed")
        off_thread(services.record_result, run, trial(chosen[1], 2, "passed"))
        link = f'a[href="/evals/runs/{run.pk}/"]'
        expect(page.locator(f".ev-chart-wide {link}")).to_have_count(0)
        off_thread(lambda: services.finish_run(EvalRun.objects.get(pk=run.pk)))
        # The run ended: the page fetches itself once, with no reload. The run leaves "In
        # progress" and is in the runs table, with its status, and in the chart.
        expect(page.locator("#active-heading")).to_have_count(0, timeout=10_000)
        row = page.locator("#eval-runs tbody tr", has=page.locator(link))
        expect(row.locator('[data-label="Run status"]')).to_have_text("Succeeded")
        expect(page.locator(f".ev-chart-wide {link}").first).to_be_attached()
        screenshots(page, "evals-after-a-live-run")
    finally:
        context.close()
