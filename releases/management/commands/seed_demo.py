"""Demo data: releases of a fictional payments web app, across the range of risk.

Idempotent: releases are keyed by version and only created when missing; reports and the demo
run of a release are only added when that release has none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from releases import services
from releases.models import Conversation, Message, Release, RiskReport, RunStatus, Severity


@dataclass(frozen=True)
class DemoReport:
    severity: Severity
    findings: list[str]
    summary: str
    days_after_release: float = 0.2


@dataclass(frozen=True)
class DemoRelease:
    version: str
    title: str
    days_ago: float
    changes: list[str] | None
    test_results: dict[str, Any] | None
    deployment_metrics: dict[str, Any] | None
    reports: list[DemoReport] = field(default_factory=list)


DEMO_RELEASES: list[DemoRelease] = [
    DemoRelease(
        version="v2.0.0",
        title="New checkout flow",
        days_ago=62,
        changes=[
            "Rewrote checkout as a single-page flow",
            "Moved cart totals calculation to the server",
            "Added Apple Pay and Google Pay buttons",
            "Removed legacy /v1/cart endpoints",
        ],
        test_results={
            "passed": 1184,
            "failed": 3,
            "skipped": 12,
            "failing_tests": [
                "checkout/totals_test::test_rounding_with_mixed_currencies",
                "checkout/wallets_test::test_apple_pay_cancelled_sheet",
                "api/v1_cart_test::test_legacy_clients_redirected",
            ],
        },
        deployment_metrics={"error_rate": 0.034, "response_time_p95": 780, "cpu_utilization": 0.71},
        reports=[
            DemoReport(
                Severity.HIGH,
                [
                    "3 failing tests, two of them in checkout totals and wallet payments",
                    "Error rate 3.4 % is above the 2 % guideline",
                    "Removing /v1/cart endpoints breaks clients that were not migrated",
                ],
                "A large change to the revenue path with failing checkout tests and an elevated "
                "error rate. Hold the release until the totals test passes.",
            )
        ],
    ),
    DemoRelease(
        version="v2.0.1",
        title="Checkout hotfix",
        days_ago=58,
        changes=[
            "Fixed rounding of cart totals with mixed currencies",
            "Restored /v1/cart endpoints behind a deprecation header",
        ],
        test_results={"passed": 1199, "failed": 0, "skipped": 12},
        deployment_metrics={"error_rate": 0.006, "response_time_p95": 410},
        reports=[
            DemoReport(
                Severity.LOW,
                ["All tests pass", "Error rate 0.6 % and p95 410 ms are within normal range"],
                "A small, targeted fix with clean tests and metrics.",
            )
        ],
    ),
    DemoRelease(
        version="v2.1.0",
        title="Payment processing",
        days_ago=41,
        changes=["Added payment processing", "Fixed authentication bug"],
        test_results={
            "passed": 142,
            "failed": 2,
            "skipped": 5,
            "failing_tests": [
                "payments/refunds_test::test_refund_is_idempotent",
                "auth/session_test::test_token_refresh_after_password_change",
            ],
        },
        deployment_metrics={"error_rate": 0.02, "response_time_p95": 450},
        reports=[
            DemoReport(
                Severity.HIGH,
                [
                    "New payment processing is a high-impact change",
                    "2 failing tests, in refunds and authentication: both critical areas",
                    "Error rate at 2 %, at the edge of the guideline",
                ],
                "Critical-path changes with failures in the very areas they touch.",
            )
        ],
    ),
    DemoRelease(
        version="v2.1.1",
        title="Refund idempotency",
        days_ago=37,
        changes=[
            "Made refunds idempotent with request keys",
            "Fixed session token refresh after a password change",
            "Upgraded the payment gateway SDK from 4.2 to 4.3",
        ],
        test_results={
            "passed": 151,
            "failed": 1,
            "skipped": 5,
            "failing_tests": ["payments/gateway_test::test_timeout_is_retried_once"],
        },
        deployment_metrics={"error_rate": 0.012, "response_time_p95": 520},
        reports=[
            DemoReport(
                Severity.MEDIUM,
                [
                    "One failing test: gateway timeout retries",
                    "p95 up from 450 ms to 520 ms after the SDK upgrade",
                ],
                "Fixes the previous release's failures; one gateway test still fails.",
            ),
            DemoReport(
                Severity.LOW,
                ["Gateway retry test fixed and passing on re-run", "Metrics stable"],
                "Re-assessed after the flaky gateway test was fixed.",
                days_after_release=1.5,
            ),
        ],
    ),
    DemoRelease(
        version="v2.2.0",
        title="Saved payment methods",
        days_ago=30,
        changes=[
            "Customers can save cards for later purchases",
            "Card data is tokenised by the payment provider",
            "Added a settings page for saved cards",
        ],
        test_results={
            "passed": 1302,
            "failed": 1,
            "skipped": 9,
            "failing_tests": ["settings/cards_test::test_delete_last_card_shows_empty_state"],
        },
        deployment_metrics={"error_rate": 0.009, "response_time_p95": 560},
        reports=[
            DemoReport(
                Severity.MEDIUM,
                [
                    "One failing UI test in the saved cards page",
                    "p95 of 560 ms is slightly above the usual ~450 ms",
                ],
                "A contained feature behind tokenisation; minor test failure and latency drift.",
            )
        ],
    ),
    DemoRelease(
        version="v2.2.1",
        title="Copy and translation fixes",
        days_ago=26,
        changes=["Fixed typos on the receipt email", "Updated German and French translations"],
        test_results={"passed": 1310, "failed": 0, "skipped": 9},
        deployment_metrics={"error_rate": 0.004, "response_time_p95": 430},
        reports=[
            DemoReport(
                Severity.LOW,
                ["Text-only changes", "All tests pass", "Clean metrics"],
                "Low-impact content changes.",
            )
        ],
    ),
    DemoRelease(
        version="v2.3.0",
        title="Database migration to PostgreSQL 16",
        days_ago=19,
        changes=[
            "Upgraded the primary database from PostgreSQL 13 to 16",
            "Rewrote the order search query to use a GIN index",
            "Dropped the unused orders.legacy_status column",
        ],
        test_results={
            "passed": 1288,
            "failed": 14,
            "skipped": 31,
            "failing_tests": [
                "orders/search_test::test_search_by_customer_email",
                "orders/search_test::test_search_is_case_insensitive",
                "reports/export_test::test_monthly_export_includes_refunds",
            ],
        },
        deployment_metrics={"error_rate": 0.071, "response_time_p95": 1350},
        reports=[
            DemoReport(
                Severity.HIGH,
                [
                    "14 failing tests, including order search and financial exports",
                    "Error rate 7.1 % is far above the 5 % threshold",
                    "p95 latency 1,350 ms, three times the usual",
                    "Dropping a column is irreversible",
                ],
                "Do not release: the migration breaks search and exports and degrades latency.",
            )
        ],
    ),
    DemoRelease(
        version="v2.3.1",
        title="Search index fix",
        days_ago=15,
        changes=["Fixed the case-insensitive collation of the order search index"],
        test_results={"passed": 1316, "failed": 0, "skipped": 17},
        deployment_metrics={"error_rate": 0.031, "response_time_p95": 690},
        reports=[
            DemoReport(
                Severity.MEDIUM,
                ["All tests pass", "Error rate 3.1 % is still above the 2 % guideline"],
                "Tests are green, but metrics have not recovered fully from v2.3.0.",
            )
        ],
    ),
    DemoRelease(
        version="v2.4.0",
        title="Single sign-on for business accounts",
        days_ago=9,
        changes=[
            "Added SAML single sign-on for business accounts",
            "Moved session storage from cookies to Redis",
            "Raised the login rate limit from 5 to 20 attempts per minute",
        ],
        test_results={"passed": 1402, "failed": 0, "skipped": 21},
        deployment_metrics=None,
    ),
    DemoRelease(
        version="v2.4.1",
        title="Session storage follow-up",
        days_ago=6,
        changes=None,
        test_results={
            "passed": 1409,
            "failed": 2,
            "skipped": 21,
            "failing_tests": [
                "auth/saml_test::test_assertion_replay_is_rejected",
                "auth/session_test::test_logout_invalidates_all_devices",
            ],
        },
        deployment_metrics={"error_rate": 0.018, "response_time_p95": None},
    ),
    DemoRelease(
        version="v2.5.0-rc1",
        title="Subscriptions (release candidate)",
        days_ago=3,
        changes=[
            "Added monthly and yearly subscriptions",
            "Proration when customers change plans",
            "Dunning emails for failed renewals",
            "Feature flag: subscriptions_enabled (off by default)",
        ],
        test_results=None,
        deployment_metrics={"error_rate": 0.011, "response_time_p95": 470},
    ),
    DemoRelease(
        version="v2.5.0-rc2",
        title="Subscriptions: second candidate",
        days_ago=1,
        changes=[],
        test_results=None,
        deployment_metrics=None,
    ),
    DemoRelease(
        version="v2.0.2",
        title="Dependency updates",
        days_ago=54,
        changes=["Bumped Django from 5.1.4 to 5.1.5 (security release)", "Bumped httpx to 0.28"],
        test_results={"passed": 1199, "failed": 0, "skipped": 12},
        deployment_metrics={"error_rate": 0.005, "response_time_p95": 405},
    ),
]

DEMO_RUN_VERSION = "v2.1.0"


class Command(BaseCommand):
    help = "Create demo releases, risk reports and one demo run. Safe to run repeatedly."

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        created = 0
        with transaction.atomic():
            for demo in DEMO_RELEASES:
                release, was_created = self._release(demo, now)
                created += was_created
                if demo.reports and not release.risk_reports.exists():
                    for report in demo.reports:
                        # Judged as the API judges a filing, so that the demo shows what a
                        # release manager would see: some reports need a person.
                        services.file_checked_report(
                            release=release,
                            severity=report.severity,
                            findings=report.findings,
                            summary=report.summary,
                            filed_at=release.created_at + timedelta(days=report.days_after_release),
                        )
            self._demo_run(Release.objects.get(version=DEMO_RUN_VERSION))
        total = Release.objects.count()
        self.stdout.write(
            self.style.SUCCESS(f"Demo data ready: {created} releases created, {total} in all.")
        )

    def _release(self, demo: DemoRelease, now: datetime) -> tuple[Release, bool]:
        existing = Release.objects.filter(version=demo.version).first()
        if existing is not None:
            return existing, False
        release = services.create_release(
            version=demo.version,
            title=demo.title,
            changes=demo.changes,
            test_results=demo.test_results,
            deployment_metrics=demo.deployment_metrics,
            created_at=now - timedelta(days=demo.days_ago),
        )
        return release, True

    def _demo_run(self, release: Release) -> None:
        """A finished run with its transcript and timeline, as a real run leaves them: the
        events have the agent's own JSON shapes (`agent.events`), so the run page shows the
        demo run as it shows any other."""
        demo = release.conversations.filter(metadata__demo=True).first()
        if demo is not None:
            if _current_shapes(demo):
                return
            demo.delete()  # written by an older seed_demo, in shapes the run page cannot show
        elif release.conversations.exists():
            return  # the release has real runs
        report = release.risk_reports.filter(severity=Severity.HIGH).order_by("filed_at").first()
        version = release.version
        # One story: the run ends as its report is filed (the report's time is the run's end).
        if report is not None:
            started = report.filed_at - timedelta(seconds=DEMO_SECONDS)
        else:
            started = release.created_at + timedelta(hours=4)
        conversation = Conversation.objects.create(
            release=release,
            status=RunStatus.SUCCEEDED,
            provider=DEMO_PROVIDER,
            model=DEMO_MODEL,
            system_prompt="You are the Detective, a release risk analyst. (Demo data.)",
            input_tokens=DEMO_TOTAL["input_tokens"],
            output_tokens=DEMO_TOTAL["output_tokens"],
            estimated_cost=Decimal("0.013110"),
            created_at=started - timedelta(seconds=2),
            started_at=started,
            finished_at=started + timedelta(seconds=DEMO_SECONDS),
            heartbeat_at=started + timedelta(seconds=DEMO_SECONDS),
            metadata={
                "demo": True,
                "provider": DEMO_PROVIDER,
                "model": DEMO_MODEL,
                "release_id": version,
                "usage": DEMO_TOTAL,
                "estimated_cost_usd": 0.01311,
            },
        )
        events, transcript = _demo_timeline(
            _Clock(started), str(conversation.pk), release.as_summary(), report
        )
        for event in events:
            services.append_event(
                conversation,
                kind=event["kind"],
                payload=event,
                created_at=datetime.fromisoformat(event["timestamp"]),
            )
        for step, message in enumerate(transcript):
            services.append_message(
                conversation, created_at=started + timedelta(seconds=step), **message
            )
        if report is not None:
            report.conversation = conversation
            report.save(update_fields=["conversation"])


DEMO_PROVIDER = "demo"
DEMO_MODEL = "demo-transcript"
DEMO_SECONDS = 6.1
DEMO_TOTAL = {"input_tokens": 2310, "output_tokens": 412, "cached_input_tokens": None}


def _demo_timeline(
    at: _Clock, run_id: str, summary: dict[str, Any], report: RiskReport | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The demo run's events (agent.events' JSON) and messages: two model calls, each asking
    for one tool; the second files the report."""
    version = summary["version"]
    findings = report.findings if report else []
    report_summary = report.summary if report else ""
    filed = f"Risk report {report.pk if report else '?'} filed for release {version!r} "
    filed += "with severity high"
    steps = [
        # step, start, seconds per text delta, text, usage, cost, tool, arguments, result
        (
            1,
            0.1,
            0.25,
            f"I'll read the summary of release {version} first.",
            {"input_tokens": 1030, "output_tokens": 52},
            0.00387,
            "get_release_summary",
            {"release_id": version},
            json.dumps(summary, indent=2),
        ),
        (
            2,
            2.0,
            0.6,
            "Payment processing is new and both failing tests sit in critical areas "
            "(refunds, authentication). Filing a high-risk report.",
            {"input_tokens": 1280, "output_tokens": 360},
            0.00924,
            "file_risk_report",
            {
                "release_id": version,
                "severity": "high",
                "findings": findings,
                "summary": report_summary,
            },
            filed,
        ),
    ]
    events: list[dict[str, Any]] = [
        {
            "kind": "run_started",
            "timestamp": at(0),
            "conversation_id": run_id,
            "provider": DEMO_PROVIDER,
            "model": DEMO_MODEL,
            "trace_id": None,
            "reasoning": "direct",
        }
    ]
    transcript: list[dict[str, Any]] = [
        {"role": Message.Role.USER, "content": f"Assess the risk of release {version}"}
    ]
    total = {"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": None}
    for step, begin, pace, text, usage, cost, tool, arguments, content in steps:
        events.append(
            {
                "kind": "model_request_started",
                "timestamp": at(begin),
                "step": step,
                "message_count": len(transcript),
                "estimated_input_tokens": usage["input_tokens"] - 40,
            }
        )
        words = text.split(" ")
        for number, first in enumerate(range(0, len(words), 4)):
            chunk = " ".join(words[first : first + 4])
            events.append(
                {
                    "kind": "text_delta",
                    "timestamp": at(begin + pace * (number + 1)),
                    "step": step,
                    "text": chunk if number == 0 else f" {chunk}",
                }
            )
        answered = begin + pace * (len(words) // 4 + 2)
        total = {
            "input_tokens": total["input_tokens"] + usage["input_tokens"],
            "output_tokens": total["output_tokens"] + usage["output_tokens"],
            "cached_input_tokens": None,
        }
        call = {
            "id": f"call_{step}",
            "name": tool,
            "arguments": arguments,
            "timestamp": at(answered),
        }
        result = {
            "tool_call_id": call["id"],
            "name": tool,
            "content": content,
            "success": True,
            "duration_ms": 40.0,
            "error_type": None,
            "data": arguments if tool == "file_risk_report" else None,
            "terminal": tool == "file_risk_report",
            "timestamp": at(answered + 0.3),
            "metadata": {},
        }
        events += [
            {
                "kind": "model_responded",
                "timestamp": at(answered),
                "step": step,
                "text": text,
                "tool_call_count": 1,
                "finish_reason": "tool_calls",
                "response_model": DEMO_MODEL,
                "duration_ms": round((answered - begin) * 1000, 1),
            },
            {
                "kind": "usage",
                "timestamp": at(answered),
                "step": step,
                "usage": {**usage, "cached_input_tokens": None},
                "total": total,
                "estimated_cost_usd": cost,
            },
            {"kind": "tool_call", "timestamp": at(answered), "step": step, "tool_call": call},
            {
                "kind": "tool_result",
                "timestamp": result["timestamp"],
                "step": step,
                "result": result,
            },
        ]
        transcript += [
            {
                "role": Message.Role.ASSISTANT,
                "content": text,
                "tool_calls": [call],
                "metadata": {
                    "step": step,
                    "model": DEMO_MODEL,
                    "finish_reason": "tool_calls",
                    "usage": {**usage, "cached_input_tokens": None},
                },
            },
            {
                "role": Message.Role.TOOL,
                "content": content,
                "tool_call_id": call["id"],
                "metadata": {"tool_name": tool},
            },
        ]
    events += [
        {
            "kind": "report_filed",
            "timestamp": at(DEMO_SECONDS - 0.1),
            "release_id": version,
            "severity": "high",
            "findings": findings,
            "report_id": str(report.pk) if report else None,
            "summary": report_summary,
        },
        {
            "kind": "run_finished",
            "timestamp": at(DEMO_SECONDS),
            "reason": "report_filed",
            "final_text": steps[-1][3],
            "steps": len(steps),
            "usage": total,
        },
    ]
    return events, transcript


class _Clock:
    """ISO timestamps `seconds` after the start of the demo run."""

    def __init__(self, start: datetime) -> None:
        self.start = start

    def __call__(self, seconds: float) -> str:
        return (self.start + timedelta(seconds=seconds)).isoformat()


def _current_shapes(conversation: Conversation) -> bool:
    """Whether a demo run's events have the agent's shapes (each payload names its kind)."""
    return not conversation.events.exclude(payload__has_key="kind").exists()
