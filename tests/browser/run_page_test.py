"""The live run page in a real browser: Chromium (Playwright) against a live site.

The site is real processes, as `manage.py up` runs them: the ASGI web server (daphne) and a
task worker, on the test database, meeting in the configured channel layer (the SQLite layer
on the embedded default, Redis when REDIS_URL is set). The worker's agent talks to a scripted
model server that streams OpenAI's wire format with a delay between events, and its tools
call the web server's release API over HTTP. So a click on Reassess goes through every
process and back to the page over the websocket.

Set DETECTIVE_SCREENSHOTS=<dir> to keep screenshots of the pages at desktop and phone
widths.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from playwright.sync_api import Browser, Page, WebSocket, expect

from assessments import services
from releases.models import AgentEvent, Conversation, Release, RiskReport, RunStatus
from tests.browser.chromium import DESKTOP, log_in, password_hash, screenshots
from tests.live_site import LiveSite
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT_MS = 30_000
# "Assess" for a release never assessed, "Reassess" after.
ASSESS = re.compile(r"^(Re)?assess$", re.IGNORECASE)
SEQ = re.compile(r'data-seq="(\d+)"')

# Records, from the moment the page has loaded, every element an update adds to the run page,
# with the run's status at that moment: what arrived live, and whether the run was still on.
ARRIVALS = """
window.__arrivals = [];
document.addEventListener("DOMContentLoaded", function () {
  new MutationObserver(function (records) {
    var status = document.querySelector("#run-status");
    records.forEach(function (record) {
      record.addedNodes.forEach(function (node) {
        if (node.nodeType !== 1 || !node.dataset || !node.dataset.seq) return;
        var parent = node.parentElement;
        var text = parent && /^step-\\d+-text$/.test(parent.id);
        window.__arrivals.push({
          seq: Number(node.dataset.seq),
          kind: node.dataset.kind || (text ? "text" : ""),
          status: status ? status.dataset.status : "",
        });
      });
    });
  }).observe(document.body, { childList: true, subtree: true });
});
"""


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="module")
def site(
    django_db_setup: None, llm: ScriptedLLM, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveSite]:
    with LiveSite(tmp_path_factory.mktemp("site"), llm.environment()) as live:
        yield live


@pytest.fixture
def manager(django_user_model: type[User]) -> User:
    """A release manager (may run assessments) whose password the site's hashers accept."""
    user = django_user_model.objects.create(username="manager", password=password_hash())
    # What the Release managers group grants (a transactional test's flush removes the group
    # itself): running assessments, and viewing releases and their reports.
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="releases",
            codename__in=["run_assessment", "view_release", "view_riskreport"],
        )
    )
    return user


@pytest.fixture
def release(make_release: Callable[..., Release]) -> Release:
    return make_release(
        "v9.1.0",
        title="Checkout <em>rewrite</em>",
        changes=["Rewrote checkout", "<script>alert('changes')</script>"],
        test_results={"passed": 140, "failed": 2, "skipped": 0},
    )


@dataclass
class Socket:
    """One run-page websocket's frames, as Chromium saw them."""

    sent: list[str] = field(default_factory=list)
    received: list[str] = field(default_factory=list)

    def last_seq_sent(self) -> int:
        return int(json.loads(self.sent[0])["last_seq"])

    def seqs_per_frame(self) -> list[list[int]]:
        """The events each frame brought (an event's fragments all carry its number)."""
        return [list(dict.fromkeys(int(seq) for seq in SEQ.findall(f))) for f in self.received]


@dataclass
class RunPage:
    page: Page
    sockets: list[Socket]

    def arrivals(self) -> list[dict[str, Any]]:
        return list(self.page.evaluate("window.__arrivals"))

    def status(self) -> str:
        return str(self.page.get_attribute("#run-status", "data-status"))

    def wait_for_status(self, *statuses: str, timeout: float = RUN_TIMEOUT_MS) -> str:
        selector = ", ".join(f'#run-status[data-status="{status}"]' for status in statuses)
        self.page.wait_for_selector(selector, timeout=timeout)
        return self.status()

    def run(self) -> Conversation:
        """The page's run, once it has ended (the worker records the outcome just after it
        has saved and published the last event)."""
        match = re.search(r"/runs/([0-9a-f-]{36})/", self.page.url)
        assert match, self.page.url
        deadline = time.monotonic() + 10
        while (run := Conversation.objects.get(pk=match.group(1))).is_active:
            assert time.monotonic() < deadline, f"run {run.pk} is still {run.status}"
            time.sleep(0.05)
        return run


@pytest.fixture
def open_page(
    browser: Browser, site: LiveSite, llm: ScriptedLLM
) -> Iterator[Callable[[User | None], RunPage]]:
    contexts = []

    def open_page(user: User | None) -> RunPage:
        context = browser.new_context(base_url=site.url, viewport=DESKTOP)
        contexts.append(context)
        if user is not None:
            context.add_cookies(
                [{"name": "sessionid", "value": site.session_cookie(user), "url": site.url}]
            )
        context.add_init_script(ARRIVALS)
        page = context.new_page()
        page.set_default_timeout(20_000)
        sockets: list[Socket] = []

        def watch(socket: WebSocket) -> None:
            if "/ws/runs/" in socket.url:
                frames = Socket()
                sockets.append(frames)
                socket.on("framesent", lambda payload: frames.sent.append(_text(payload)))
                socket.on("framereceived", lambda payload: frames.received.append(_text(payload)))

        page.on("websocket", watch)
        return RunPage(page, sockets)

    yield open_page
    for context in contexts:
        context.close()
    # A test that failed half-way leaves no run behind for the next one.
    for run in Conversation.objects.filter(status__in=RunStatus.active()):
        services.cancel_assessment(run)
    deadline = time.monotonic() + 15
    while Conversation.objects.filter(status__in=RunStatus.active()).exists():
        assert time.monotonic() < deadline, f"a run did not end:\n{site.log_text()}"
        time.sleep(0.1)
    llm.configure(mode="assess", delay=0.0, narration=0)


def _text(payload: str | bytes) -> str:
    return payload.decode() if isinstance(payload, bytes) else payload


def reassess(page: Page, release: Release) -> None:
    page.goto(f"/releases/{release.version}/")
    page.get_by_role("button", name=ASSESS).click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))


def event_kinds(run: Conversation) -> list[str]:
    return list(
        AgentEvent.objects.filter(conversation=run).order_by("seq").values_list("kind", flat=True)
    )


def assert_delivered_exactly_once(socket: Socket, total: int) -> None:
    """The page said which event it showed last; the socket then brought every later event,
    in order, each once, up to the last one."""
    delivered = [seq for frame in socket.seqs_per_frame() for seq in frame]
    assert delivered == list(range(socket.last_seq_sent() + 1, total + 1)), delivered


def timeline_items(page: Page) -> list[tuple[str, str, str]]:
    """Each entry of the timeline: its kind, event number and text (whitespace folded)."""
    return [
        (str(kind), str(seq), " ".join(str(text).split()))
        for kind, seq, text in page.eval_on_selector_all(
            "#run-timeline > li",
            "items => items.map(i => [i.dataset.kind, i.dataset.seq, i.innerText])",
        )
    ]


def assert_same_as_a_fresh_load(run_page: RunPage) -> None:
    """What the page built from live updates is what the server renders from the database:
    no event missing, none twice, every streamed text whole."""
    fresh = run_page.page.context.new_page()
    fresh.goto(run_page.page.url)
    live_items, saved_items = timeline_items(run_page.page), timeline_items(fresh)
    fresh.close()
    assert live_items == saved_items
    seqs = [int(seq) for _, seq, _ in live_items]
    assert seqs == sorted(set(seqs))
    ids = run_page.page.eval_on_selector_all("[id]", "elements => elements.map(e => e.id)")
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


# ---- the tests ---------------------------------------------------------------------------------


def test_reassess_streams_the_run_live_and_the_report_reaches_the_release_page(
    open_page: Callable[[User | None], RunPage],
    llm: ScriptedLLM,
    manager: User,
    release: Release,
) -> None:
    llm.configure(delay=0.03, narration=40)
    run_page = open_page(None)
    page = run_page.page

    log_in(page, manager.username, f"/releases/{release.version}/")
    expect(page.locator("h1")).to_contain_text(release.version)
    # No model has filed on it: the header shows the policy's verdict as the gate's (issue 37).
    expect(page.locator("h1")).to_contain_text("the policy's verdict (no model assessment)")
    # Release data is shown as text, never run.
    expect(page.locator(".changes")).to_contain_text("<script>alert('changes')</script>")

    page.get_by_role("button", name=ASSESS).click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    assert run_page.wait_for_status("succeeded", "failed", "cancelled") == "succeeded"

    run = run_page.run()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.triggered_by == manager
    # Text and tool steps came over the websocket while the run was still going.
    live = [a for a in run_page.arrivals() if a["status"] == RunStatus.RUNNING]
    assert any(a["kind"] == "text" for a in live), run_page.arrivals()
    assert any(a["kind"] == "tool_call" for a in live), run_page.arrivals()
    assert any(a["kind"] == "tool_result" for a in live), run_page.arrivals()
    kinds = event_kinds(run)
    assert_delivered_exactly_once(run_page.sockets[-1], len(kinds))
    assert_same_as_a_fresh_load(run_page)

    timeline = page.locator("#run-timeline")
    expect(timeline.locator('[data-kind="tool_call"]')).to_have_count(2)
    expect(timeline.locator('[data-kind="tool_call"]').first).to_contain_text("get_release_summary")
    expect(timeline.locator(".tl-flag-ok")).to_have_count(2)
    expect(page.locator("#step-1-text")).to_contain_text("step39")  # the whole narration
    # The scripted model files the policy's verdict: a checkout rewrite with failing tests.
    expect(timeline.locator('[data-kind="report_filed"]')).to_contain_text("High risk")
    expect(page.locator("#run-outcome")).to_contain_text("the report is filed")
    expect(page.locator("#run-usage")).to_contain_text("1,200 in")
    expect(page.locator("#run-cancel")).to_have_count(0)
    # The outcome leads the page once the run ends, without a reload: the verdict in the
    # header, the duration, the report with its evidence, the transcript.
    expect(page.locator("h1 #run-verdict")).to_contain_text("High risk")
    expect(page.locator("#run-duration")).to_contain_text("took")
    # The scripted model files the policy's sentences only: said once, not shown twice (#40).
    expect(page.locator("#run-report")).to_contain_text("The model agreed with the policy")
    expect(page.locator("#transcript-heading")).to_be_visible()
    assert page.evaluate("window.__sameDocument === true")
    screenshots(page, "run-finished-live")

    report = RiskReport.objects.get(conversation=run)
    page.goto(f"/releases/{release.version}/")
    latest = page.locator("section.report")
    expect(page.locator("h1")).to_contain_text("High risk")
    expect(latest).to_contain_text(report.findings[0])
    expect(latest).to_contain_text(f"run {str(run.pk)[:8]}")
    screenshots(page, "release-with-new-report")
    page.goto(f"/runs/{run.pk}/")
    # What the model read, said plainly (issue 40): this model has the drill-downs.
    expect(page.locator("#run-reads")).to_contain_text("drill-downs it chooses to call")
    screenshots(page, "run-finished")


def test_a_reload_mid_run_shows_the_whole_timeline_without_gaps_or_repeats(
    open_page: Callable[[User | None], RunPage],
    llm: ScriptedLLM,
    manager: User,
    release: Release,
) -> None:
    llm.configure(delay=0.03, narration=200)
    run_page = open_page(manager)
    page = run_page.page
    reassess(page, release)
    page.wait_for_function("document.querySelectorAll('#step-1-text span[data-seq]').length >= 5")
    page.reload()
    assert run_page.wait_for_status("succeeded", "failed", "cancelled") == "succeeded"

    run = run_page.run()
    total = len(event_kinds(run))
    before, after = run_page.sockets
    assert any(before.seqs_per_frame())  # the first page had events streamed to it
    shown = after.last_seq_sent()
    assert 0 < shown < total  # reloaded mid-run, with events both before and after
    assert_delivered_exactly_once(after, total)
    assert_same_as_a_fresh_load(run_page)
    expect(page.locator("#step-1-text")).to_contain_text("step199")


def test_cancel_from_the_run_page_ends_the_run_within_seconds(
    open_page: Callable[[User | None], RunPage],
    llm: ScriptedLLM,
    manager: User,
    release: Release,
) -> None:
    llm.configure(delay=0.05, narration=400)  # about 12 s of streaming
    run_page = open_page(manager)
    page = run_page.page
    reassess(page, release)
    page.wait_for_function("document.querySelectorAll('#step-1-text span[data-seq]').length >= 3")
    expect(page.locator("#run-elapsed")).to_have_text(re.compile(r"^elapsed \d+ s$"))
    screenshots(page, "run-mid-run")
    assert run_page.status() == RunStatus.RUNNING

    pressed = time.monotonic()
    page.locator("#run-cancel").click()
    assert run_page.wait_for_status("cancelled", "succeeded", "failed", timeout=10_000) == (
        "cancelled"
    )
    assert time.monotonic() - pressed < 5
    expect(page.locator("#run-outcome")).to_contain_text("Cancelled")
    run = run_page.run()
    assert run.status == RunStatus.CANCELLED
    assert event_kinds(run)[-1] == "run_cancelled"
    assert "file_risk_report" not in [m.metadata.get("tool_name") for m in run.messages.all()]
    assert_same_as_a_fresh_load(run_page)
    screenshots(page, "run-cancelled")


def test_a_provider_that_refuses_the_key_shows_the_run_failed_with_the_cause(
    open_page: Callable[[User | None], RunPage],
    llm: ScriptedLLM,
    manager: User,
    release: Release,
) -> None:
    llm.configure(mode="unauthorized")
    run_page = open_page(manager)
    page = run_page.page
    reassess(page, release)
    assert run_page.wait_for_status("failed", "succeeded", "cancelled") == "failed"
    outcome = page.locator("#run-outcome")
    expect(outcome).to_contain_text("The model provider refused the credentials")
    expect(outcome).to_contain_text("Incorrect API key")

    page.reload()
    expect(page.locator("#run-error")).to_contain_text("refused the credentials")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "failed")
    screenshots(page, "run-failed")
    page.goto("/")
    expect(page.locator("main")).to_contain_text(release.version)
    screenshots(page, "home-with-a-failed-run")


def test_while_the_model_thinks_the_page_says_so_with_the_time(
    open_page: Callable[[User | None], RunPage],
    llm: ScriptedLLM,
    manager: User,
    release: Release,
) -> None:
    # Four seconds before each streamed piece after the first (the role, no text): the page
    # must load and subscribe within that window to see the step wait, and on a busy CI
    # machine one second was sometimes gone before it had (PostgreSQL + Redis pass).
    llm.configure(delay=4.0, narration=2)
    run_page = open_page(manager)
    page = run_page.page
    reassess(page, release)
    waiting = page.locator("#run-waiting")
    expect(waiting).to_be_visible(timeout=10_000)
    expect(waiting).to_have_text(re.compile(r"^waiting for the model \(\d+\.\d s\)$"))
    # Once the model's text arrives, the step shows it instead.
    expect(page.locator("#step-1-text")).not_to_be_empty(timeout=10_000)
    expect(waiting).to_be_hidden()
    # (Each streamed piece takes four seconds: the fixture cancels the rest of the run.)
