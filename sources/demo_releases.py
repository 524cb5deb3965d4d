"""The demo's releases: a fictional payments web app (the default service), a search API and a
small shop whose code is real and run (`demo_shop`), across the range of risk, as their sources
would describe them.

Each release says what its pipeline would have sent: its commits (Conventional Commits
messages; None: the git range was never sent), its test results (counts and the failing tests
by name; None: no JUnit XML), its deployment metrics (None: none measured) and the reports a
person or the model filed on it. `sources.demo_files` writes these as real files (a git
repository, JUnit XML, OpenMetrics) and the seed ingests them through `sources.services`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import demo_shop
from releases.models import Severity


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
    service: str | None = None  # None: the default service
    # Typed in by hand (the release managers' form) instead of ingested from files.
    by_hand: bool = False
    # The demo shop's release (`demo_shop`): its one commit writes the shop's real code at this
    # version, the code `manage.py demo_traffic` runs and whose spans it sends.
    shop_code: bool = False


SEARCH_SERVICE = "Search API"
SHOP_SERVICE = demo_shop.SERVICE
# Green tests and flat metrics: what the shop's 1.1.0 does wrong shows only in its traces.
SHOP_TESTS = {"passed": 48, "failed": 0, "skipped": 0}
SHOP_METRICS = {"error_rate": 0.004, "response_time_p95": 120}

DEMO_RELEASES: list[DemoRelease] = [
    DemoRelease(
        version="v2.0.0",
        title="New checkout flow",
        days_ago=62,
        changes=[
            "feat(checkout): Rewrote checkout as a single-page flow",
            "refactor(cart): Moved cart totals calculation to the server",
            "feat(wallets): Added Apple Pay and Google Pay buttons",
            "feat(api)!: Removed legacy /v1/cart endpoints",
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
            "fix(cart): Fixed rounding of cart totals with mixed currencies",
            "fix(api): Restored /v1/cart endpoints behind a deprecation header",
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
        changes=["feat(payments): Added payment processing", "fix(auth): Fixed authentication bug"],
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
            "fix(refunds): Made refunds idempotent with request keys",
            "fix(auth): Fixed session token refresh after a password change",
            "build(deps): Upgraded the payment gateway SDK from 4.2 to 4.3",
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
            "feat(cards): Customers can save cards for later purchases",
            "feat(cards): Card data is tokenised by the payment provider",
            "feat(settings): Added a settings page for saved cards",
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
        changes=[
            "fix(email): Fixed typos on the receipt email",
            "chore(i18n): Updated German and French translations",
        ],
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
            "build(db): Upgraded the primary database from PostgreSQL 13 to 16",
            "perf(orders): Rewrote the order search query to use a GIN index",
            "refactor(db)!: Dropped the unused orders.legacy_status column",
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
        changes=["fix(orders): Fixed the case-insensitive collation of the order search index"],
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
            "feat(accounts): Added SAML single sign-on for business accounts",
            "refactor(storage): Moved session storage from cookies to Redis",
            "chore(limits): Raised the login rate limit from 5 to 20 attempts per minute",
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
            "feat(subscriptions): Added monthly and yearly subscriptions",
            "feat(subscriptions): Proration when customers change plans",
            "feat(subscriptions): Dunning emails for failed renewals",
            "chore(flags): Feature flag: subscriptions_enabled (off by default)",
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
        by_hand=True,
    ),
    DemoRelease(
        version="v2.0.2",
        title="Dependency updates",
        days_ago=54,
        changes=[
            "build(deps): Bumped Django from 5.1.4 to 5.1.5 (security release)",
            "build(deps): Bumped httpx to 0.28",
        ],
        test_results={"passed": 1199, "failed": 0, "skipped": 12},
        deployment_metrics={"error_rate": 0.005, "response_time_p95": 405},
    ),
    # A second service, so that the demo shows more than one history.
    DemoRelease(
        version="v1.4.0",
        title="Fuzzy product search",
        days_ago=40,
        service=SEARCH_SERVICE,
        changes=[
            "feat(query): Added fuzzy matching for product names",
            "perf(index): Sharded the product index by region",
        ],
        test_results={"passed": 640, "failed": 0, "skipped": 3},
        deployment_metrics={"error_rate": 0.004, "response_time_p95": 180},
        reports=[
            DemoReport(
                Severity.LOW,
                ["All tests pass", "Error rate 0.4 % and p95 180 ms are as usual"],
                "A contained search improvement with clean tests and metrics.",
            )
        ],
    ),
    DemoRelease(
        version="v1.5.0",
        title="Personalised ranking",
        days_ago=20,
        service=SEARCH_SERVICE,
        changes=[
            "feat(ranking): Ranked results by purchase history",
            "build(deps): Upgraded the Elasticsearch client from 8.11 to 8.15",
            "refactor(query)!: Removed the deprecated q_legacy parameter",
        ],
        test_results={
            "passed": 655,
            "failed": 1,
            "skipped": 3,
            "failing_tests": ["ranking/personalised_test::test_cold_start_user_gets_popular_items"],
        },
        deployment_metrics={"error_rate": 0.009, "response_time_p95": 410},
        reports=[
            DemoReport(
                Severity.MEDIUM,
                [
                    "One failing ranking test for new customers",
                    "p95 rose from 180 ms to 410 ms with the new ranking",
                ],
                "The ranking works for known customers; new ones and latency need a look.",
            )
        ],
    ),
    DemoRelease(
        version="v1.5.1",
        title="Ranking fallback",
        days_ago=4,
        service=SEARCH_SERVICE,
        changes=[
            "fix(ranking): Fall back to popular items for new customers",
            "perf(query): Cached ranking features for ten minutes",
        ],
        test_results={"passed": 657, "failed": 0, "skipped": 3},
        deployment_metrics={"error_rate": 0.005, "response_time_p95": 230},
    ),
    # The demo shop (`demo_shop`), a service that is really run: `manage.py demo_traffic`
    # deploys each version and sends its spans to the site through the OTLP exporter. 1.1.0's
    # rounding divides by a line's quantity, and one cart in six has a line emptied to 0.
    DemoRelease(
        version="v1.0.0",
        title="The shop opens",
        days_ago=6,
        service=SHOP_SERVICE,
        changes=["feat(shop): Products, cart totals and a health check"],
        test_results=SHOP_TESTS,
        deployment_metrics=SHOP_METRICS,
        shop_code=True,
    ),
    DemoRelease(
        version="v1.1.0",
        title="Prices rounded per unit",
        days_ago=0.25,
        service=SHOP_SERVICE,
        changes=["fix(cart): Round prices per unit"],
        test_results=SHOP_TESTS,
        deployment_metrics=SHOP_METRICS,
        shop_code=True,
    ),
]
