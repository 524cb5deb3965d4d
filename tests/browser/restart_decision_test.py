"""A wait for a person outlives a restart of the web server (issue 37, item 3), for real:
`manage.py up` serves the site; the GitHub Action's steps (tests/github_action.py) send a
release that the scripted model files low where the policy says high, so the report waits for
a person, and the verdict step waits for the decision. Then the web server is killed (`kill
-9`); `up` starts it again; the waiting client rides out the outage (one line says so); a
release manager accepts the policy's High in Chromium on the new web server; the job exits 1,
the decision's code, with the decision in its summary."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import Permission, User
from playwright.sync_api import Browser, expect

from releases.models import RiskReport, Service
from sources import services as sources_services
from tests.browser.chromium import DESKTOP, log_in, password_hash
from tests.browser.pipeline_decision_test import checkout_with_a_refund_change
from tests.github_action import ActionRun, run_action
from tests.github_action_test import ACTION, runner_environment
from tests.llm_server import ScriptedLLM
from tests.pipeline_test import junit_reports
from tests.up_site import Up, _children

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _web_pid(site: Up) -> int | None:
    found = [
        pid
        for pid, cmd in _children(site.process.pid).items()
        if b"detective_site.web_server" in cmd
    ]
    return found[0] if len(found) == 1 else None


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/accounts/login/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_job_waiting_for_a_decision_gets_it_after_the_web_server_restarts(
    browser: Browser, tmp_path: Path, django_user_model: type[User]
) -> None:
    repo = checkout_with_a_refund_change(tmp_path)
    reports = junit_reports(tmp_path)
    # The service, the token and the user before `up` starts: it seeds the demo releases only
    # into an empty database.
    shop = Service.objects.create(name="Shop", slug="shop")
    _, token = sources_services.create_token("CI of shop", shop)
    manager = django_user_model.objects.create(username="rm", password=password_hash())
    manager.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["review_report", "view_release", "view_riskreport"]
        )
    )

    def job(url: str) -> ActionRun:
        return run_action(
            ACTION,
            {"url": url, "token": token, "service": "shop", "git-range": "v1.0.0..v1.1.0",
             "junit": str(reports), "wait": "180", "wait-for-decision": "300"},
            repo,
            runner_environment(),
            ref_name="1.1.0",
        )  # fmt: skip

    with ScriptedLLM(mode="always-low") as llm, ThreadPoolExecutor(max_workers=1) as pool:
        up = Up(tmp_path, llm.environment())
        try:
            up.ready()
            waiting = pool.submit(job, up.url)
            stamped = RiskReport.objects.filter(pipeline_waiting_since__isnull=False)
            up.wait_until(
                lambda: stamped.exists() or waiting.done(), 240, "the job to wait for a person"
            )
            assert stamped.exists(), "\n".join(waiting.result().logs) + up.text()[-3000:]
            report = stamped.get()
            assert report.needs_review and report.policy_severity == "high"

            web = _web_pid(up)
            assert web is not None
            os.kill(web, signal.SIGKILL)
            killed_at = time.monotonic()
            up.wait_until(lambda: _web_pid(up) not in (None, web), 30, "a new web server")
            up.wait_until(lambda: _answers(up.url), 60, "the new web server to answer")
            back_after = time.monotonic() - killed_at
            assert not waiting.done(), "\n".join(waiting.result().logs)

            page = browser.new_page(base_url=up.url, viewport=DESKTOP)
            log_in(page, "rm", "/review/")
            item = page.locator(f"#queue-item-{report.pk}")
            expect(item.locator(".rv-pipeline")).to_contain_text(
                "a pipeline waits for this decision since"
            )
            item.get_by_role("button", name="Accept the policy's High").click()
            decided_at = time.monotonic()
            done = waiting.result(timeout=90)
            reached_in = time.monotonic() - decided_at
            page.close()
        finally:
            up.kill()
    logs = "\n".join(done.logs)
    print(
        f"\nweb server back {back_after:.1f} s after kill -9; the decision reached the "
        f"waiting job {reached_in:.2f} s after the click"
    )
    assert done.exit_code == 1, logs + up.text()[-3000:]
    assert done.outputs["verdict"]["exit-code"] == "1"
    # One line for the outage, however many asks it took; the review page said once.
    assert logs.count("Detective did not answer (") == 1, logs
    assert logs.count("waiting for a person's decision: ") == 1
    assert "**Why:** rm decided High" in done.summary, done.summary
    assert "web server was killed (SIGKILL); restarting it" in up.text()
