"""Write the files of the scenarios made of files: JUnit XML, commits, OpenMetrics text, and
for some the running version's spans as its OTLP exporter sends them (OTLP/JSON).
Over 600 lines: every scenario's releases are data here, one block each, so that all their
files are made one way; the writers are the first 250 lines.

    uv run python -m evals.scenarios.files.make_files

Plain Python, deterministic (seeded noise, fixed times, commit SHAs hashed from their
content): running it again writes the same bytes, so a diff in the files is a change of this
script. The files are committed; this script is how they were made and how to change them.
After a change, bump `suite_version` in `evals/scenarios/suite.toml`.

Each scenario is a service's releases in deploy order, the last one under test. Every
release's metrics file holds the previous release's window (its baseline) and its own (30
minutes from its deploy), one gauge sample every 30 seconds, as an export of both windows
from a monitoring system would.

The spans (OTLP/JSON) are written by `otlp_traffic.py` beside it.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from xml.sax.saxutils import quoteattr

from evals.scenarios.files.otlp_traffic import PRICING_ERROR, SHOP_ROUTES, Traffic, otlp_json

HERE = Path(__file__).resolve().parent
START = datetime(2026, 9, 1, 10, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=30)
STEP = timedelta(seconds=30)

# The suite every release runs: (file, classname, test name). Nothing in a critical area.
COMMON_TESTS = [
    (f"{area}/{module}_test.py", f"{area}.{module}_test", f"test_{case}")
    for area, module, cases in [
        ("catalog", "listing", ["sorts_by_price", "filters_by_brand", "paginates", "shows_stock"]),
        ("catalog", "product", ["renders_gallery", "shows_reviews", "links_related"]),
        ("search", "query", ["matches_prefix", "ignores_case", "ranks_exact_first"]),
        ("search", "suggest", ["debounces_input", "limits_to_ten", "highlights_match"]),
        ("ui", "carousel", ["autoplay_advances", "swipes_on_touch", "stops_on_hover"]),
        ("ui", "forms", ["shows_inline_errors", "keeps_values", "labels_fields"]),
        ("notifications", "email", ["renders_order_shipped", "uses_locale", "plain_text_part"]),
        ("orders", "history", ["lists_newest_first", "filters_by_status", "exports_csv"]),
        ("docs", "links", ["no_dead_links", "anchors_resolve"]),
    ]
    for case in cases
]


@dataclass
class Failure:
    file: str
    classname: str
    name: str
    message: str
    # pytest's error in a fixture: <error message='failed on setup with "..."'>.
    setup: bool = False


@dataclass
class Commit:
    message: str
    files: list[tuple[str, int, int]]  # path, added, deleted
    author: str = "Dana Reyes"
    email: str = "dana@example.com"
    # Files git saw renamed (status R): old path, new path, added, deleted.
    renamed: list[tuple[str, str, int, int]] = field(default_factory=list)
    # path -> the lines changed, `git diff -U0` headers (old_start, old_count, new_start,
    # new_count), as the CI client sends them: what a stack trace's frames are matched to.
    hunks: dict[str, list[tuple[int, int, int, int]]] = field(default_factory=dict)


@dataclass
class Release:
    version: str
    title: str
    commits: list[Commit]
    p95_ms: float
    error_rate: float
    failures: list[Failure] = field(default_factory=list)
    # Failed, then passed on a rerun of the same commit (Surefire's flakyFailure).
    reruns: list[Failure] = field(default_factory=list)
    extra_tests: list[tuple[str, str, str]] = field(default_factory=list)
    samples: int = 61
    baseline_samples: int | None = None  # None: as many as the previous release measured
    total_tests: int | None = None
    # Failed, and failed again on each of Surefire's 2 reruns (rerunFailure).
    rerun_failures: list[Failure] = field(default_factory=list)
    # Tests as Maven Surefire reports them: one TEST-<class>.xml per class, replacing the
    # pytest report of COMMON_TESTS (the release's tests are then `extra_tests` alone).
    surefire: bool = False
    traffic: Traffic | None = None


@dataclass
class Scenario:
    id: str
    releases: list[Release]


def _sha(*parts: str) -> str:
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()


def junit_xml(release: Release) -> str:
    if release.total_tests == 0:
        # The CI job ran and its report holds no test at all.
        return '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites tests="0"/>\n'
    failing = {(f.classname, f.name): f for f in release.failures}
    rerun = {(f.classname, f.name): f for f in release.reruns}
    tests = COMMON_TESTS + release.extra_tests
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', "<testsuites>"]
    by_file: dict[str, list[tuple[str, str, str]]] = {}
    for test in tests:
        by_file.setdefault(test[0], []).append(test)
    rng = random.Random(release.version)
    for file, cases in by_file.items():
        suite = file.removesuffix(".py").replace("/", ".")
        failures = sum((c[1], c[2]) in failing for c in cases)
        lines.append(
            f'  <testsuite name={quoteattr(suite)} tests="{len(cases)}" '
            f'failures="{failures}" errors="0" skipped="0" file={quoteattr(file)}>'
        )
        for _, classname, name in cases:
            seconds = f"{rng.uniform(0.01, 0.9):.3f}"
            attrs = (
                f"classname={quoteattr(classname)} name={quoteattr(name)} "
                f'file={quoteattr(file)} time="{seconds}"'
            )
            failure = failing.get((classname, name))
            flaky = rerun.get((classname, name))
            if flaky is not None:
                lines.append(f"    <testcase {attrs}>")
                lines.append(
                    f'      <flakyFailure type="AssertionError" message={quoteattr(flaky.message)}'
                    "/>"
                )
                lines.append("    </testcase>")
                continue
            if failure is None:
                lines.append(f"    <testcase {attrs}/>")
                continue
            lines.append(f"    <testcase {attrs}>")
            if failure.setup:
                # As pytest 8/9 write a fixture's exception (the test itself never ran).
                message = f'failed on setup with "{failure.message}"'
                lines.append(
                    f"      <error message={quoteattr(message)}>{_escape(failure.message)}</error>"
                )
            else:
                lines.append(
                    f'      <failure type="AssertionError" message={quoteattr(failure.message)}>'
                    f"{failure.message}</failure>"
                )
            lines.append("    </testcase>")
        lines.append("  </testsuite>")
    lines.append("</testsuites>")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


SUREFIRE_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<testsuite '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xsi:noNamespaceSchemaLocation="https://maven.apache.org/surefire/maven-surefire-plugin/xsd/'
    'surefire-test-report-3.0.xsd" version="3.0"'
)


def surefire_reports(release: Release) -> dict[str, str]:
    """Maven Surefire 3's TEST-<class>.xml per test class, as `mvn test` with
    `-Dsurefire.rerunFailingTestsCount=2` writes them: a test that failed then passed has a
    flakyFailure; one that failed on every run, its failure and a rerunFailure per rerun."""
    failing = {(f.classname, f.name): f for f in release.failures}
    flaky = {(f.classname, f.name): f for f in release.reruns}
    rerun = {(f.classname, f.name): f for f in release.rerun_failures}
    by_class: dict[str, list[str]] = {}
    for _, classname, name in release.extra_tests:
        by_class.setdefault(classname, []).append(name)
    rng = random.Random(f"surefire {release.version}")
    reports = {}
    for classname, names in by_class.items():
        cases, counts = [], {"failures": 0, "flakes": 0}
        simple = classname.rsplit(".", 1)[-1]
        for name in names:
            key = (classname, name)
            attrs = f'name="{name}" classname="{classname}" time="{rng.uniform(0.01, 0.9):.3f}"'
            failure = failing.get(key) or rerun.get(key)
            if key in flaky:
                counts["flakes"] += 1
                message = flaky[key].message
                cases += [
                    f"  <testcase {attrs}>",
                    f'    <flakyFailure message={quoteattr(message)} type="'
                    'org.opentest4j.AssertionFailedError">',
                    f"      <stackTrace><![CDATA[org.opentest4j.AssertionFailedError: {message}",
                    f"\tat {classname}.{name}({simple}.java:{40 + len(name)})",
                    "]]></stackTrace>",
                    "    </flakyFailure>",
                    "  </testcase>",
                ]
            elif failure is not None:
                counts["failures"] += 1
                trace = (
                    f"org.opentest4j.AssertionFailedError: {failure.message}\n"
                    f"\tat {classname}.{name}({simple}.java:{40 + len(name)})\n"
                )
                kind = 'type="org.opentest4j.AssertionFailedError"'
                cases += [
                    f"  <testcase {attrs}>",
                    f"    <failure message={quoteattr(failure.message)} {kind}>"
                    f"<![CDATA[{trace}]]></failure>",
                ]
                if key in rerun:
                    for _ in range(2):
                        cases += [
                            f"    <rerunFailure message={quoteattr(failure.message)} {kind}>",
                            f"      <stackTrace><![CDATA[{trace}]]></stackTrace>",
                            "    </rerunFailure>",
                        ]
                cases.append("  </testcase>")
            else:
                cases.append(f"  <testcase {attrs}/>")
        flakes = f' flakes="{counts["flakes"]}"' if counts["flakes"] else ""
        reports[f"TEST-{classname}.xml"] = (
            "\n".join(
                [
                    f'{SUREFIRE_HEAD} name="{classname}" time="{rng.uniform(0.5, 3):.3f}" '
                    f'tests="{len(names)}" errors="0" skipped="0" failures="{counts["failures"]}"'
                    f"{flakes}>",
                    *cases,
                    "</testsuite>",
                ]
            )
            + "\n"
        )
    return reports


def commits_json(release: Release, deployed_at: datetime, parent: str | None) -> str:
    records = []
    for index, commit in enumerate(release.commits):
        authored = deployed_at - timedelta(hours=len(release.commits) - index + 1)
        sha = _sha(release.version, str(index), commit.message)
        records.append(
            {
                "sha": sha,
                "author_name": commit.author,
                "author_email": commit.email,
                "authored_at": authored.isoformat(),
                "message": commit.message,
                "files": [
                    {"path": path, "old_path": None, "added": added, "deleted": deleted}
                    | (
                        {"hunks": [list(h) for h in commit.hunks[path]]}
                        if path in commit.hunks
                        else {}
                    )
                    for path, added, deleted in commit.files
                ]
                + [
                    {"path": new, "old_path": old, "added": added, "deleted": deleted}
                    for old, new, added, deleted in commit.renamed
                ],
                "parents": [parent] if parent else [],
            }
        )
        parent = sha
    return json.dumps(records, indent=1) + "\n"


def _series(
    rng: random.Random, start: datetime, count: int, p95: float, errors: float
) -> list[tuple[float, float, float]]:
    return [
        (
            (start + STEP * i).timestamp(),
            round(p95 * rng.uniform(0.9, 1.1), 1),
            round(max(0.0, errors * rng.uniform(0.8, 1.2)), 5),
        )
        for i in range(count)
    ]


def openmetrics(
    release: Release,
    deployed_at: datetime,
    previous: tuple[Release, datetime] | None,
) -> str:
    rng = random.Random(f"metrics {release.version}")
    points = []
    if previous is not None:
        before, at = previous
        count = release.baseline_samples if release.baseline_samples is not None else before.samples
        points += _series(rng, at + STEP / 2, count, before.p95_ms, before.error_rate)
    points += _series(
        rng, deployed_at + STEP / 2, release.samples, release.p95_ms, release.error_rate
    )
    lines = ["# TYPE detective_response_time_p95_ms gauge"]
    lines += [f"detective_response_time_p95_ms {p95} {stamp:.3f}" for stamp, p95, _ in points]
    lines.append("# TYPE detective_error_rate gauge")
    lines += [f"detective_error_rate {errors} {stamp:.3f}" for stamp, _, errors in points]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def write(scenario: Scenario, root: Path = HERE) -> list[str]:
    """Write one scenario's files under `root`; the TOML lines naming them (its scenario
    file's `[[sources.releases]]`)."""
    directory = root / scenario.id
    directory.mkdir(parents=True, exist_ok=True)
    toml: list[str] = []
    parent: str | None = None
    previous: tuple[Release, datetime] | None = None
    for index, release in enumerate(scenario.releases):
        deployed_at = START + timedelta(days=7 * index)
        stem = release.version
        if release.surefire:
            reports = [f"surefire-reports/{stem}/{name}" for name in surefire_reports(release)]
            (directory / "surefire-reports" / stem).mkdir(parents=True, exist_ok=True)
            for name, text in surefire_reports(release).items():
                (directory / "surefire-reports" / stem / name).write_text(text, encoding="utf-8")
        else:
            reports = [f"{stem}.junit.xml"]
            (directory / f"{stem}.junit.xml").write_text(junit_xml(release), encoding="utf-8")
        commits = commits_json(release, deployed_at, parent)
        (directory / f"{stem}.commits.json").write_text(commits, encoding="utf-8")
        # A rebuild (no commit in its range) keeps the previous release's head.
        parent = json.loads(commits)[-1]["sha"] if release.commits else parent
        metrics = openmetrics(release, deployed_at, previous)
        (directory / f"{stem}.metrics.txt").write_text(metrics, encoding="utf-8")
        previous = (release, deployed_at)
        toml += [
            "[[sources.releases]]",
            f'version = "{release.version}"',
            f"deployed_at = {deployed_at.strftime('%Y-%m-%dT%H:%M:%SZ')}",
            f"title = {json.dumps(release.title)}",
            "junit = [" + ", ".join(f'"{name}"' for name in reports) + "]",
            f'commits = "{stem}.commits.json"',
            f'metrics = "{stem}.metrics.txt"',
        ]
        if release.traffic is not None:
            traces = otlp_json(release.version, release.traffic, deployed_at)
            (directory / f"{stem}.traces.json").write_text(traces, encoding="utf-8")
            toml.append(f'traces = "{stem}.traces.json"')
        toml.append("")
    return toml


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


def main() -> None:
    """Write every scenario's files and print the TOML that names them."""
    for scenario in SCENARIOS:
        print(f"# {scenario.id}.toml\n" + "\n".join(write(scenario)))


if __name__ == "__main__":
    main()
