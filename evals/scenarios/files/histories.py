"""The scenarios made of files, as data: each a service's releases in deploy order, the last
one under test (`make_files.py` writes their files)."""

from __future__ import annotations

from evals.scenarios.files.otlp_traffic import PRICING_ERROR, SHOP_ROUTES, Traffic
from evals.scenarios.files.release_shapes import Commit, Failure, Release, Scenario

# ---- the scenarios -----------------------------------------------------------------------------


def _routine(
    version: str,
    p95: float = 410,
    errors: float = 0.001,
    touch: tuple[str, ...] = (),
    **kw: object,
) -> Release:
    """An ordinary green release: a feature and a fix in the shop's front end, and a small
    change to each file of `touch` (the files the release under test changes, so that their
    author is not new to them)."""
    tidy = [Commit(f"refactor: tidy {path}", [(path, 6, 4)]) for path in touch]
    return Release(
        version=version,
        title=f"Routine release {version}",
        commits=[
            Commit(f"feat(catalog): sort options for {version}", [("catalog/listing.py", 24, 6)]),
            Commit("fix(ui): align the carousel arrows", [("ui/carousel.js", 3, 3)]),
            *tidy,
        ],
        p95_ms=p95,
        error_rate=errors,
        **kw,  # type: ignore[arg-type]
    )


FLAKY = [
    Failure(
        "ui/carousel_test.py",
        "ui.carousel_test",
        "test_autoplay_advances",
        "TimeoutError: the next slide did not appear within 2000 ms",
    ),
    Failure(
        "search/suggest_test.py",
        "search.suggest_test",
        "test_debounces_input",
        "AssertionError: expected 1 request, got 2 (timer fired late)",
    ),
]

REFUND_FAILURES = [
    Failure(
        "payments/refunds_test.py",
        "payments.refunds_test",
        "test_partial_refund_rounds_to_minor_unit",
        "AssertionError: refunded 10.004 EUR, expected 10.00 EUR",
    ),
    Failure(
        "payments/refunds_test.py",
        "payments.refunds_test",
        "test_refund_in_jpy_has_no_decimals",
        "AssertionError: refunded 1000.5 JPY, expected 1001 JPY",
    ),
]
PAYMENT_TESTS = [
    ("payments/refunds_test.py", "payments.refunds_test", f"test_{case}")
    for case in [
        "partial_refund_rounds_to_minor_unit",
        "refund_in_jpy_has_no_decimals",
        "full_refund_restores_balance",
        "refund_twice_is_refused",
    ]
]

WISHLIST = ("wishlist/lists.py", "docs/wishlist.md")
PAYMENT_CODE = ("payments/refunds.py", "payments/currency.py")
ORDER_HISTORY = ("orders/history.py", "orders/templates/history.html")
BILLING_CODE = ("billing/invoice.py", "docs/billing.md")

COUPON_TEST = Failure(
    "billing/invoice_test.py",
    "billing.invoice_test",
    "test_total_keeps_an_expired_coupon_applied_at_checkout",
    "AssertionError: invoice total 59.90, expected 49.90 (coupon dropped on expiry)",
)
BILLING_TESTS = [
    ("billing/invoice_test.py", "billing.invoice_test", f"test_{case}")
    for case in ["total_keeps_an_expired_coupon_applied_at_checkout", "total_includes_vat"]
]

SCENARIOS = [
    Scenario(
        "known_flaky_failures",
        [
            # On and off: each of the two failed in 3 of the last 5 releases.
            _routine("v30.0.0", touch=WISHLIST, failures=FLAKY),
            _routine("v30.0.1", touch=WISHLIST, failures=[FLAKY[1]], reruns=[FLAKY[0]]),
            _routine("v30.0.2", touch=WISHLIST, failures=[FLAKY[0]]),
            _routine("v30.0.3", touch=WISHLIST, failures=[FLAKY[1]]),
            _routine("v30.0.4", touch=WISHLIST, failures=[FLAKY[0]]),
            Release(
                "v30.1.0",
                "Wishlist sharing",
                [
                    Commit(
                        "feat(wishlist): share a wishlist by link", [("wishlist/lists.py", 48, 2)]
                    ),
                    Commit("docs: the wishlist's sharing", [("docs/wishlist.md", 12, 0)]),
                ],
                p95_ms=405,
                error_rate=0.001,
                failures=FLAKY,
            ),
        ],
    ),
    Scenario(
        "new_failure_after_payment_change",
        [
            *(
                _routine(f"v31.0.{i}", touch=PAYMENT_CODE, extra_tests=PAYMENT_TESTS)
                for i in range(4)
            ),
            Release(
                "v31.1.0",
                "Refund rounding",
                [
                    Commit(
                        "fix(payments): round partial refunds to the currency's minor unit",
                        [("payments/refunds.py", 38, 11), ("payments/currency.py", 22, 4)],
                    ),
                    Commit("chore(ui): update the footer links", [("ui/footer.html", 4, 4)]),
                ],
                p95_ms=415,
                error_rate=0.0012,
                failures=REFUND_FAILURES,
                extra_tests=PAYMENT_TESTS,
            ),
        ],
    ),
    Scenario(
        "latency_regression_against_history",
        [
            *(
                _routine(f"v32.0.{i}", p95=p95, touch=("catalog/product.py",))
                for i, p95 in enumerate([420, 405, 430, 415])
            ),
            Release(
                "v32.1.0",
                "Product page recommendations",
                [
                    Commit(
                        "feat(catalog): recommendations on the product page",
                        [("catalog/recommend.py", 140, 0), ("catalog/product.py", 26, 3)],
                    ),
                ],
                p95_ms=880,
                error_rate=0.001,
            ),
        ],
    ),
    Scenario(
        "error_rate_against_history",
        [
            *(_routine(f"v33.0.{i}", errors=0.001, touch=ORDER_HISTORY) for i in range(4)),
            Release(
                "v33.1.0",
                "Order history filters",
                [
                    Commit(
                        "feat(orders): filter the order history by date",
                        [(ORDER_HISTORY[0], 64, 12), (ORDER_HISTORY[1], 30, 8)],
                    ),
                ],
                p95_ms=420,
                error_rate=0.015,
            ),
        ],
    ),
    Scenario(
        "large_diffuse_change",
        [
            *(_routine(f"v34.0.{i}") for i in range(3)),
            Release(
                "v34.1.0",
                "Accounts rework",
                [
                    Commit(
                        "refactor(auth): move sessions and accounts to the new identity module",
                        [(f"auth/identity/part_{i:02d}.py", 61, 14) for i in range(28)]
                        + [
                            (f"migrations/{112 + i:04d}_identity_step.py", 60, 15)
                            for i in range(12)
                        ],
                        author="Sam Okafor",
                        email="sam.okafor@example.com",
                    ),
                ],
                p95_ms=412,
                error_rate=0.0011,
            ),
        ],
    ),
    Scenario(
        "too_little_metric_data",
        [
            *(_routine(f"v35.0.{i}", touch=("notifications/email.py",)) for i in range(3)),
            Release(
                "v35.1.0",
                "Email templates",
                [
                    Commit(
                        "feat(notifications): new shipping email",
                        [("notifications/email.py", 40, 6)],
                    )
                ],
                p95_ms=400,
                error_rate=0.001,
                samples=3,
                baseline_samples=2,
            ),
        ],
    ),
    Scenario(
        "database_upgrade_postgres16",
        [
            *(
                _routine(f"v23.0.{i}", p95=450, touch=("orders/search.py", "orders/models.py"))
                for i in range(3)
            ),
            Release(
                "v23.1.0",
                "Database migration to PostgreSQL 16",
                [
                    Commit(
                        "chore(db): Upgraded the primary database from PostgreSQL 13 to 16",
                        [("deploy/postgres/version.tf", 3, 3), ("docker-compose.yml", 1, 1)],
                    ),
                    Commit(
                        "perf(orders): Rewrote the order search query to use a GIN index",
                        [
                            ("orders/search.py", 34, 19),
                            ("orders/migrations/0031_gin_index.py", 22, 0),
                        ],
                    ),
                    Commit(
                        "refactor(orders): Dropped the unused orders.legacy_status column",
                        [
                            ("orders/migrations/0032_drop_legacy_status.py", 14, 0),
                            ("orders/models.py", 0, 6),
                        ],
                    ),
                ],
                p95_ms=1350,
                error_rate=0.071,
                failures=[
                    Failure(
                        "orders/search_test.py",
                        "orders.search_test",
                        "test_search_by_customer_email",
                        "AssertionError: 0 results, expected 3",
                    ),
                    Failure(
                        "orders/search_test.py",
                        "orders.search_test",
                        "test_search_is_case_insensitive",
                        "AssertionError: 'ACME' found 0 orders, 'acme' found 4",
                    ),
                    Failure(
                        "reports/export_test.py",
                        "reports.export_test",
                        "test_monthly_export_includes_refunds",
                        "ProgrammingError: column orders.legacy_status does not exist",
                    ),
                ],
                extra_tests=[
                    (
                        "orders/search_test.py",
                        "orders.search_test",
                        "test_search_by_customer_email",
                    ),
                    (
                        "orders/search_test.py",
                        "orders.search_test",
                        "test_search_is_case_insensitive",
                    ),
                    (
                        "reports/export_test.py",
                        "reports.export_test",
                        "test_monthly_export_includes_refunds",
                    ),
                ],
            ),
        ],
    ),
    Scenario(
        "revert_brings_failure_back",
        [
            _routine("v36.0.0", touch=BILLING_CODE, extra_tests=BILLING_TESTS),
            _routine(
                "v36.0.1", touch=BILLING_CODE, extra_tests=BILLING_TESTS, failures=[COUPON_TEST]
            ),
            Release(
                "v36.0.2",
                "Coupon fix",
                [
                    Commit(
                        "fix(billing): keep the invoice total when a coupon expires after checkout",
                        [("billing/invoice.py", 18, 5)],
                    )
                ],
                p95_ms=410,
                error_rate=0.001,
                extra_tests=BILLING_TESTS,
            ),
            _routine("v36.0.3", touch=BILLING_CODE, extra_tests=BILLING_TESTS),
            Release(
                "v36.1.0",
                "Invoice clean-up",
                [
                    Commit(
                        'Revert "fix(billing): keep the invoice total when a coupon expires '
                        'after checkout"\n\nThis reverts the coupon fix: it slowed the invoice '
                        "job down.",
                        [("billing/invoice.py", 5, 18)],
                    ),
                    Commit("docs(billing): the invoice job", [("docs/billing.md", 9, 2)]),
                ],
                p95_ms=405,
                error_rate=0.001,
                failures=[COUPON_TEST],
                extra_tests=BILLING_TESTS,
            ),
        ],
    ),
    Scenario(
        "no_tests_ran",
        [
            *(_routine(f"v38.0.{i}", touch=("cart/badge.py",)) for i in range(3)),
            Release(
                "v38.1.0",
                "Cart badge",
                [Commit("feat(cart): a badge with the item count", [("cart/badge.py", 22, 3)])],
                p95_ms=410,
                error_rate=0.001,
                total_tests=0,
            ),
        ],
    ),
    Scenario(
        "new_exception_one_route",
        [
            *(
                _routine(f"v39.0.{i}", touch=("shop/pricing.py",), traffic=Traffic(SHOP_ROUTES, 20))
                for i in range(3)
            ),
            Release(
                "v39.1.0",
                "Prices per line, product filters",
                [
                    Commit(
                        "Round prices per line",
                        [("shop/pricing.py", 2, 1)],
                        author="Ana Lima",
                        email="ana@example.com",
                        hunks={"shop/pricing.py": [(14, 1, 14, 2)]},
                    ),
                    Commit(
                        "feat(catalog): filter products by colour",
                        [("catalog/filters.py", 31, 2)],
                        hunks={"catalog/filters.py": [(20, 2, 20, 31)]},
                    ),
                    Commit("docs: the cart's API", [("docs/cart.md", 9, 0)]),
                ],
                p95_ms=412,
                error_rate=0.001,
                traffic=Traffic(
                    SHOP_ROUTES,
                    failing_route=SHOP_ROUTES[0],
                    failing_every=30,
                    exception=PRICING_ERROR,
                ),
            ),
        ],
    ),
    # Issue 36: one route twice as slow and more, the service's p95 and error rate flat.
    Scenario(
        "route_slower_one_route",
        [
            *(_routine(f"v45.0.{i}", touch=("catalog/search.py",)) for i in range(2)),
            _routine(
                "v45.0.2",
                touch=("catalog/search.py",),
                traffic=Traffic(SHOP_ROUTES, 150, every_seconds=10),
            ),
            Release(
                "v45.1.0",
                "Product search by colour",
                [
                    Commit(
                        "feat(catalog): search products by colour",
                        [("catalog/search.py", 46, 5)],
                        author="Ana Lima",
                        email="ana@example.com",
                        hunks={"catalog/search.py": [(30, 5, 30, 46)]},
                    ),
                    Commit("fix(ui): the cart badge's contrast", [("ui/badge.css", 2, 2)]),
                    Commit("docs: the search API", [("docs/search.md", 12, 0)]),
                ],
                p95_ms=414,
                error_rate=0.001,
                traffic=Traffic(
                    SHOP_ROUTES,
                    150,
                    every_seconds=10,
                    slow_route=SHOP_ROUTES[1],
                    slow_ms=(380.0, 720.0),
                ),
            ),
        ],
    ),
    Scenario(
        "clean_docs_long_green_history",
        [
            *(_routine(f"v37.0.{i}", touch=("docs/returns.md",)) for i in range(8)),
            Release(
                "v37.1.0",
                "Docs: the returns policy",
                [Commit("docs: clarify the returns window", [("docs/returns.md", 3, 1)])],
                p95_ms=408,
                error_rate=0.001,
            ),
        ],
    ),
]

# Issue 40: key risks only the history shows (a rename, an empty range, a rerun that failed,
# an error in setup); the policy's own sentences must say each.
SHIPPING_TESTS = [
    ("shipping/rates_test.py", "shipping.rates_test", f"test_{case}")
    for case in ["free_shipping_from_the_threshold", "remote_postcode_surcharge", "weight_bands"]
]
RENAMED_SHIPPING_TESTS = [
    ("shipping/test_rates.py", "shipping.test_rates", name) for _, _, name in SHIPPING_TESTS
]
SEARCH_CLIENT = "com.northwind.catalog.SearchIndexClientTest"
JAVA_TESTS = [
    (file, classname, name)
    for file, classname, names in [
        ("", "com.northwind.catalog.ProductListingTest", ["sortsByPrice", "filtersByBrand"]),
        ("", "com.northwind.catalog.PriceFormatTest", ["formatsEuros", "roundsHalfEven"]),
        ("", SEARCH_CLIENT, ["findsByPrefix", "retriesWhenTheIndexIsBusy", "closesIdleSessions"]),
    ]
    for name in names
]
BUSY_INDEX = Failure(
    "",
    SEARCH_CLIENT,
    "retriesWhenTheIndexIsBusy",
    "expected: <3> but was: <1> (attempts before giving up on a busy index)",
)
ORDER_HISTORY_ERRORS = [
    Failure(
        "orders/history_test.py",
        "orders.history_test",
        f"test_{case}",
        "django.db.utils.ProgrammingError: column orders_order.delivery_street does not exist",
        setup=True,
    )
    for case in ["lists_newest_first", "filters_by_status", "exports_csv"]
]

SCENARIOS += [
    Scenario(
        "renamed_test_file_fails",
        [
            *(
                _routine(f"v41.0.{i}", touch=("shipping/rates.py",), extra_tests=SHIPPING_TESTS)
                for i in range(4)
            ),
            Release(
                "v41.1.0",
                "Free shipping per country",
                [
                    Commit(
                        "test(shipping): name the rates tests the pytest way",
                        [],
                        renamed=[("shipping/rates_test.py", "shipping/test_rates.py", 2, 2)],
                    ),
                    Commit(
                        "feat(shipping): a free-shipping threshold per country",
                        [("shipping/rates.py", 31, 9), ("shipping/thresholds.py", 40, 0)],
                    ),
                ],
                p95_ms=412,
                error_rate=0.001,
                failures=[
                    Failure(
                        "shipping/test_rates.py",
                        "shipping.test_rates",
                        "test_free_shipping_from_the_threshold",
                        "AssertionError: shipping 4.90 EUR for a 60.00 EUR order, expected 0.00",
                    )
                ],
                extra_tests=RENAMED_SHIPPING_TESTS,
            ),
        ],
    ),
    Scenario(
        "empty_range_errors_rise",
        [
            *(_routine(f"v42.0.{i}", touch=("catalog/listing.py",)) for i in range(4)),
            # Both refs at the same commit: the CI rebuilt v42.0.3 on a new base image.
            Release("v42.0.4", "Rebuild on the new base image", [], p95_ms=418, error_rate=0.034),
        ],
    ),
    Scenario(
        "surefire_rerun_failure",
        [
            _routine("v43.0.0", surefire=True, extra_tests=JAVA_TESTS),
            _routine("v43.0.1", surefire=True, extra_tests=JAVA_TESTS, reruns=[BUSY_INDEX]),
            _routine("v43.0.2", surefire=True, extra_tests=JAVA_TESTS),
            _routine("v43.0.3", surefire=True, extra_tests=JAVA_TESTS, reruns=[BUSY_INDEX]),
            Release(
                "v43.1.0",
                "Search index client",
                [
                    Commit(
                        "fix(catalog): give up on a busy search index after the first answer",
                        [
                            (
                                "src/main/java/com/northwind/catalog/SearchIndexClient.java",
                                14,
                                22,
                            )
                        ],
                    ),
                    Commit("docs: the catalog's search settings", [("docs/search.md", 8, 2)]),
                ],
                p95_ms=408,
                error_rate=0.001,
                surefire=True,
                extra_tests=JAVA_TESTS,
                rerun_failures=[BUSY_INDEX],
            ),
        ],
    ),
    Scenario(
        "setup_error_after_migration",
        [
            *(_routine(f"v44.0.{i}", touch=("orders/models.py",)) for i in range(3)),
            Release(
                "v44.1.0",
                "Delivery address in two fields",
                [
                    Commit(
                        "feat(orders): split the delivery address into street and city",
                        [
                            ("orders/models.py", 12, 4),
                            ("orders/migrations/0042_split_delivery_address.py", 38, 0),
                        ],
                    ),
                    Commit("fix(ui): the cart's empty state", [("ui/cart.html", 6, 2)]),
                ],
                p95_ms=410,
                error_rate=0.001,
                failures=ORDER_HISTORY_ERRORS,
            ),
        ],
    ),
]
