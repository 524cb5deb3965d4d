"""A pipeline that waits for the person, for real: the GitHub Action's steps (run as GitHub
runs them, tests/github_action.py) send a release to the live site and have it assessed by the
worker against a scripted model that files low where the policy says high, so the report waits
for a person. The verdict step, with `wait-for-decision`, prints the review page and waits; the
review page shows that a pipeline waits; a release manager accepts the policy's High in
Chromium; the waiting step exits with the decision's code (1: at or above high) within
seconds. Re-running the job on the same data keeps the decision.

Set DETECTIVE_SCREENSHOTS=<dir> to keep the review page with its waiting pipeline."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from playwright.sync_api import Browser, expect

from releases.models import Release, RiskReport, Service
from sources import services as sources_services
from tests.browser.chromium import DESKTOP, log_in, password_hash, screenshots
from tests.github_action import ActionRun, run_action
from tests.github_action_test import ACTION, runner_environment
from tests.live_site import LiveSite
from tests.llm_server import ScriptedLLM
from tests.pipeline_test import checkout, git, junit_reports

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class RerunLostTheDecision(Exception):
    """Re-running the job on the same data did not keep the person's decision."""


def checkout_with_a_refund_change(root: Path) -> Path:
    """The pipeline test's checkout, with a change in `payments/` on v1.1.0: its failing
    `tests.pay::test_refund` beside a change in payments is high for the policy (the test's
    name alone would not be)."""
    repo = checkout(root)
    (repo / "payments").mkdir()
    (repo / "payments" / "refund.py").write_text("def refund(amount):\n    return -amount\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "Refund by amount")
    git(repo, "tag", "-f", "v1.1.0")
    return repo


def job(
    site: LiveSite, token: str, repo: Path, reports: Path, wait_for_decision: str = "300"
) -> ActionRun:
    return run_action(
        ACTION,
        {"url": site.url, "token": token, "service": "shop", "git-range": "v1.0.0..v1.1.0",
         "junit": str(reports), "wait": "180", "wait-for-decision": wait_for_decision},
        repo,
        runner_environment(),
        ref_name="1.1.0",
    )  # fmt: skip


def test_the_job_waits_for_the_persons_decision_and_a_rerun_keeps_it(
    browser: Browser, tmp_path: Path, django_user_model: type[User]
) -> None:
    repo = checkout_with_a_refund_change(tmp_path)
    reports = junit_reports(tmp_path)
    shop = Service.objects.create(name="Shop", slug="shop")
    _, token = sources_services.create_token("CI of shop", shop)
    manager = django_user_model.objects.create(username="rm", password=password_hash())
    manager.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["review_report", "view_release", "view_riskreport"]
        )
    )
    with (
        ScriptedLLM(mode="always-low") as llm,
        LiveSite(tmp_path / "logs", llm.environment()) as site,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        waiting = pool.submit(job, site, token, repo, reports)
        stamped = RiskReport.objects.filter(pipeline_waiting_since__isnull=False)
        deadline = time.monotonic() + 240
        while not stamped.exists() and not waiting.done() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stamped.exists(), (
            "\n".join(waiting.result().logs) if waiting.done() else site.log_text()
        )
        report = stamped.get()
        assert report.needs_review and report.policy_severity == "high"

        page = browser.new_page(base_url=site.url, viewport=DESKTOP)
        log_in(page, "rm", "/review/")
        item = page.locator(f"#queue-item-{report.pk}")
        expect(item.locator(".rv-pipeline")).to_contain_text(
            "a pipeline waits for this decision since"
        )
        screenshots(page, "review-pipeline-waiting")
        assert not waiting.done()
        item.get_by_role("button", name="Accept the policy's High").click()
        decided_at = time.monotonic()
        done = waiting.result(timeout=60)
        reached_in = time.monotonic() - decided_at
        print(f"the decision reached the waiting job in {reached_in:.2f} s")
        page.close()
        logs = "\n".join(done.logs)
        assert done.exit_code == 1, logs + site.log_text()
        assert reached_in < 10, f"the decision reached the job after {reached_in:.1f} s"
        assert logs.count("waiting for a person's decision: ") == 1
        assert f"/review/#queue-item-{report.pk}" in logs
        assert "**Why:** rm decided High" in done.summary

        # The same job again, on the same data (what people do when anything else flakes).
        # (Without the decision kept it waits again: 5 s are enough to see that.)
        again = job(site, token, repo, reports, wait_for_decision="5")
        release = Release.objects.get(service=shop, version="1.1.0")
        latest = RiskReport.objects.filter(release=release).latest()
        if again.exit_code != 1 or latest.pk != report.pk:
            raise RerunLostTheDecision(
                f"the re-run exited {again.exit_code} and the latest report is {latest.pk} "
                f"(the decided one: {report.pk})"
            )
