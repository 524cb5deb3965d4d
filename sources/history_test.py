"""A release's history read from the detail tables, on a real database: several releases of two
services, ingested through the sources' own services (JUnit XML, commits, metrics)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from detective_client.records import CommitRecord, FileChangeRecord
from releases.models import Release
from releases.verdicts import current_policy, previous_p95
from sources import history as history_reads
from sources import services
from sources.history import change_facts, read_history
from sources.judging import judge_release
from sources.parsers.records import MetricSampleRecord
from sources.services import Origin, ReleaseFields

pytestmark = pytest.mark.django_db

API = Origin("api")
START = datetime(2026, 11, 1, 12, tzinfo=UTC)


def release(service: str, version: str, day: int | None, **extra: object) -> Release:
    created, _ = services.upsert_release(
        ReleaseFields(
            version=version,
            service=service,
            deployed_at=START + timedelta(days=day) if day is not None else None,
        ),
        API,
    )
    if extra:
        Release.objects.filter(pk=created.pk).update(**extra)
        created.refresh_from_db()
    return created


def junit(target: Release, **tests: str) -> None:
    """One report: each test `name=outcome`, where "flaky" fails first and passes on a rerun
    (two attempts, as a CI job's retry sends them)."""
    cases = []
    rerun = []
    for name, outcome in tests.items():
        if outcome in ("failed", "flaky"):
            cases.append(
                f'<testcase classname="checkout.PayTest" name="{name}" '
                f'file="tests/payments/test_pay.py"><failure message="boom"/></testcase>'
            )
        else:
            cases.append(f'<testcase classname="checkout.PayTest" name="{name}"/>')
        if outcome == "flaky":
            rerun.append(f'<testcase classname="checkout.PayTest" name="{name}"/>')
    for batch, label in ((cases, "first"), (rerun, "rerun")):
        if batch:
            xml = f'<testsuite name="pay">{"".join(batch)}</testsuite>'
            services.ingest_junit(
                target, io.BytesIO(xml.encode()), f"{label}-{target.version}.xml", API
            )


def commits(target: Release, author: str, *files: tuple[str, int, int], message: str) -> None:
    record = CommitRecord(
        sha=(author[:1].encode().hex() + target.version.replace(".", "").replace("v", "")).ljust(
            40, "0"
        )[:40],
        author_name=author.title(),
        author_email=f"{author}@example.com",
        authored_at=target.deployed_at or START,
        message=message,
        files=tuple(FileChangeRecord(path, None, a, d) for path, a, d in files),
        parents=("a" * 40,),
    )
    services.ingest_commits(target, [record], API)


def metrics(
    target: Release, window: str, values: list[float], name: str = "response_time_p95"
) -> None:
    at = target.deployed_at or START
    samples = [
        MetricSampleRecord(name, (), at + timedelta(minutes=i), v) for i, v in enumerate(values)
    ]
    # The window's own figure beside the samples, as Prometheus' ingestion stores it.
    samples.append(MetricSampleRecord(f"{name}:window", (), at, max(values)))
    services.ingest_metrics(target, samples, API, window=window)


@pytest.fixture
def checkout() -> list[Release]:
    """Five checkout releases (one of them deployed before a release created earlier) and,
    between them, releases of another service."""
    made = []
    plan = [
        ("v1.0.0", 0, {"test_charge": "passed", "test_refund": "failed", "test_new": "passed"}),
        ("v1.1.0", 2, {"test_charge": "flaky", "test_refund": "passed", "test_new": "passed"}),
        ("v1.2.0", 4, {"test_charge": "passed", "test_refund": "failed", "test_new": "passed"}),
        ("v1.3.0", 6, {"test_charge": "failed", "test_refund": "passed", "test_new": "passed"}),
    ]
    for version, day, tests in plan:
        target = release("checkout", version, day)
        junit(target, **tests)
        commits(target, "ada", ("src/payments/gateway.py", 10, 2), message=f"feat: {version}")
        metrics(target, "release", [400.0 + i for i in range(5)])
        release("search", version, day + 1)  # another service, deployed in between
        junit(Release.objects.get(service__slug="search", version=version), test_refund="failed")
        made.append(target)
    latest = release("checkout", "v2.0.0", 8)
    junit(latest, test_charge="failed", test_refund="flaky", test_new="failed")
    commits(latest, "ada", ("src/payments/gateway.py", 100, 20), message="feat: faster gateway")
    commits(
        latest,
        "bob",
        ("db/migrations/0042_drop_legacy.sql", 30, 0),
        ("src/auth/session.py", 5, 5),
        message="chore: drop orders.legacy_status\n\nAlso alters the sessions table.",
    )
    metrics(latest, "release", [900.0 + i for i in range(6)])
    metrics(latest, "baseline", [410.0 + i for i in range(4)])
    made.append(latest)
    return made


def test_the_history_is_the_services_by_deploy_order(checkout: list[Release]) -> None:
    latest = checkout[-1]
    # Created after v2.0.0 but deployed before all of them: it is the oldest, not the previous.
    release("checkout", "v0.9.0", -1)
    history = read_history(latest, window=3)
    assert [ref.version for ref in history.previous] == ["v1.3.0", "v1.2.0", "v1.1.0"]
    assert history.service == "checkout" and history.window == 3 and history.has_test_detail

    charge = history.test("checkout.PayTest::test_charge")
    assert charge is not None and charge.failed_here and not charge.flaky_here
    assert charge.file == "tests/payments/test_pay.py"
    assert charge.recent == (("v1.3.0", "failed"), ("v1.2.0", "passed"), ("v1.1.0", "flaky"))
    assert (charge.failed_in_recent, charge.flaky_in_recent, charge.failure_runs) == (2, 1, 2)
    assert charge.first_failed_in == "v1.1.0" and charge.failed_before

    refund = history.test("checkout.PayTest::test_refund")
    assert refund is not None and refund.outcome == "flaky" and refund.flaky_here
    # Over the whole past, not only the window: it first failed in v1.0.0 (the search
    # service's failures of a test of the same name do not count).
    assert refund.first_failed_in == "v1.0.0"

    new = history.test("checkout.PayTest::test_new")
    assert new is not None and new.first_failed_in == "v2.0.0" and not new.failed_before
    assert new.failed_in_recent == 0 and new.recent_releases == 3
    assert [t.label for t in history.failing()] == [
        "checkout.PayTest::test_charge",
        "checkout.PayTest::test_new",
    ]


def test_the_change_facts_follow_kamei_and_know_who_is_new(checkout: list[Release]) -> None:
    facts = change_facts(checkout[-1])
    assert facts is not None
    assert (facts.commits, facts.file_count, facts.lines_added, facts.lines_deleted) == (
        2,
        3,
        135,
        25,
    )
    assert facts.directories == ("db/migrations", "src/auth", "src/payments")
    assert facts.subsystems == ("db", "src")
    assert 0 < facts.entropy < 1
    assert any("alters the sessions table" in m for m in facts.messages)
    by_name = {a.author: a for a in facts.authors}
    assert by_name["Ada"].earlier_commits == 4 and by_name["Ada"].new_files == ()
    assert by_name["Bob"].earlier_commits == 0 and by_name["Bob"].new_to_all_files
    assert set(by_name["Bob"].new_directories) == {"db/migrations", "src/auth"}
    assert [a.author for a in facts.new_authors()] == ["Bob"]


def test_the_metric_series_have_both_windows_and_the_recent_releases(
    checkout: list[Release],
) -> None:
    history = read_history(checkout[-1], window=2)
    (p95,) = history.metrics  # the `:window` figure is not a series
    assert p95.name == "response_time_p95"
    assert p95.release == tuple(900.0 + i for i in range(6))
    assert p95.baseline == tuple(410.0 + i for i in range(4))
    assert [version for version, _ in p95.recent] == ["v1.3.0", "v1.2.0"]
    assert p95.comparison()[1] == "the baseline window"


def test_an_exporters_gauges_are_the_summary_metrics_series_in_the_keys_unit() -> None:
    # An OpenMetrics file names p95 in seconds and the error rate in percent: the judge must
    # get them as the summary reads them, or it finds "too little data" for a full series.
    earlier = release("checkout", "v1.0.0", 0)
    metrics(earlier, "release", [0.4] * 3, name="detective_response_time_p95_seconds")
    target = release("checkout", "v1.1.0", 2)
    metrics(target, "baseline", [0.4, 0.5], name="detective_response_time_p95_seconds")
    metrics(target, "release", [0.9, 1.0], name="detective_response_time_p95_seconds")
    metrics(target, "release", [1.5, 2.5], name="detective_error_rate_percent")
    metrics(target, "release", [7.0], name="queue_depth")

    series = {m.name: m for m in read_history(target, window=5).metrics}

    # Only the summary's figures are series the judge compares; another gauge is not.
    assert sorted(series) == ["error_rate", "response_time_p95"]
    assert series["response_time_p95"].release == (900.0, 1000.0)
    assert series["response_time_p95"].baseline == (400.0, 500.0)
    assert series["response_time_p95"].recent == (("v1.0.0", (400.0, 400.0, 400.0)),)
    assert series["error_rate"].release == pytest.approx((0.015, 0.025))


def test_counters_and_histograms_are_series_of_rates_and_quantiles_never_raw_values() -> None:
    # The judge once compared medians of cumulative counters (which grow with the uptime) and
    # buckets of every `le` mixed: it must see what each interval's error rate and p95 were.
    target = release("checkout", "v1.1.0", 2)
    at = target.deployed_at or target.created_at
    samples = []
    for i in range(4):
        moment = at + timedelta(minutes=i)
        # 100 requests a minute, 2 of them 500s, after a restart at minute 2 (a reset).
        base = 0 if i >= 2 else 5000
        samples += [
            MetricSampleRecord("http_requests_total", (("code", "200"),), moment, base + 98 * i),
            MetricSampleRecord("http_requests_total", (("code", "500"),), moment, base + 2 * i),
        ]
        for le, share in (("0.1", 0.5), ("0.5", 1.0), ("+Inf", 1.0)):
            samples.append(
                MetricSampleRecord(
                    "http_request_duration_seconds_bucket", (("le", le),), moment, 100 * i * share
                )
            )
    services.ingest_metrics(target, samples, Origin("test"))

    series = {m.name: m for m in read_history(target, window=5).metrics}

    # Minute 2 follows the restart: its growth is the new value (0 + 2*2 of 0 + 100*2).
    assert series["error_rate"].release == pytest.approx((0.02, 0.02, 0.02))
    # 95 of 100 observations lies 0.9 of the way into (0.1, 0.5] s: 460 ms.
    assert series["response_time_p95"].release == pytest.approx((460.0, 460.0, 460.0))


def test_the_queries_do_not_grow_with_the_releases(checkout: list[Release]) -> None:
    with CaptureQueriesContext(connection) as few:
        read_history(checkout[3], window=10)
    with CaptureQueriesContext(connection) as many:
        read_history(checkout[-1], window=10)
    # The earlier releases, the tests (those failing here, their history and whether there are
    # any, in one), the commits, the policy (for the service's metric names: judge_release
    # hands it over), the samples.
    assert len(many) == len(few) == 5, [q["sql"][:120] for q in many.captured_queries]


def test_a_release_without_failures_reads_its_tests_in_one_query(checkout: list[Release]) -> None:
    clean = release("checkout", "v2.1.0", 9)
    junit(clean, test_charge="passed", test_refund="passed")
    with CaptureQueriesContext(connection) as tests_read:
        found, has_tests = history_reads.test_histories(clean, window=10)
    assert (found, has_tests) == ((), True)
    assert len(tests_read) == 2  # the earlier releases, then the tests
    assert history_reads.test_histories(release("checkout", "v2.2.0", 10), window=10) == ((), False)


def test_the_summary_the_agent_reads_takes_six_queries(checkout: list[Release]) -> None:
    # Issue #29: 10-19 queries on the demo releases before; the history was 80 % of the time.
    latest = Release.objects.select_related("service").get(pk=checkout[-1].pk)
    with CaptureQueriesContext(connection) as queries:
        digest = judge_release(latest).for_agent()
    # The policy, the earlier releases, the history's three of its own (tests, commits,
    # samples) and the release's error groups from its traces (issue 36).
    assert len(queries) == 6, [q["sql"][:120] for q in queries.captured_queries]
    assert digest["version"] == latest.version


def test_the_summary_api_takes_six_queries_the_release_and_policy_in_one(
    checkout: list[Release], client: Client, settings: Any
) -> None:
    """Issue 39: the summary API <= 6 queries (it took 8: the release and the policy apart,
    and the failing tests apart from their history)."""
    settings.DETECTIVE_API_KEY = "k" * 40
    latest = checkout[-1]
    path = f"/api/releases/{latest.version}/summary?service=checkout"
    headers = {"Authorization": f"Bearer {'k' * 40}"}
    with CaptureQueriesContext(connection) as queries:
        answer = client.get(path, headers=headers)
    assert answer.status_code == 200, answer.content
    assert len(queries) == 6, [q["sql"][:120] for q in queries.captured_queries]
    # The same summary as judging the release read on its own (the policy read apart).
    alone = judge_release(Release.objects.select_related("service").get(pk=latest.pk))
    assert answer.json() == json.loads(json.dumps(alone.for_agent(), default=str))
    assert answer.json()["policy"]["version"] == current_policy().version


def test_a_release_without_detail_has_an_empty_history_and_the_same_verdict() -> None:
    bare = release("checkout", "v3.0.0", 1)
    assert read_history(bare).is_empty
    assert judge_release(bare).history.is_empty


def test_the_previous_p95_is_the_same_services_by_deploy_order() -> None:
    first = release("checkout", "v1.0.0", 0, deployment_metrics={"response_time_p95": 300})
    release("search", "v5.0.0", 2, deployment_metrics={"response_time_p95": 40})
    later = release("checkout", "v1.1.0", 4, deployment_metrics={"response_time_p95": 310})
    # Created last, deployed between the two: the previous of v1.1.0.
    release("checkout", "v1.0.5", 1, deployment_metrics={"response_time_p95": 200})
    assert previous_p95(later) == 200
    assert previous_p95(first) is None
    judged = judge_release(later)
    assert "against 200 ms (the previous release)" in " ".join(
        judged.verdict.evidence() + [s.detail for s in judged.verdict.signals]
    )


def test_the_verdict_reads_the_history_through_the_hook(checkout: list[Release]) -> None:
    judged = judge_release(checkout[-1])
    signals = {s.name: s for s in judged.verdict.signals}
    # test_charge failed on and off, but the release changed the payments code beside it:
    # not excused as known flaky. test_new never failed before.
    assert "known_flaky_failures" not in signals
    assert ("All 2 failing tests fail beside changed code: src/payments/gateway.py") in signals[
        "correlated_failures"
    ].detail
    assert "checkout.PayTest::test_new failed for the first time in checkout" in (
        signals["new_failures"].detail
    )
    assert signals["critical_paths"].areas == ("auth", "migrations", "payments")
    # Bob is new to the migrations and the auth code; 6 samples are too few to judge p95.
    assert signals["new_authors"].level == "medium"
    assert signals["metric_judge"].needs_review
    shown = judged.for_agent()
    assert set(shown["drilldowns"]) == {
        "get_test_details",
        "get_code_changes",
        "get_metric_history",
    }
    assert signals["metric_judge"].detail in shown["policy"]["evidence"]
    # The small profile's view: no drill-downs to name (it has no tools for them).
    brief = judged.for_agent(brief=True)
    assert "drilldowns" not in brief
    assert list(brief["policy"]["evidence"].values()) == shown["policy"]["evidence"][:5]


def test_a_known_flaky_failure_alone_keeps_a_release_low(checkout: list[Release]) -> None:
    docs = release("checkout", "v2.1.0", 10)
    junit(docs, test_charge="failed", test_refund="passed", test_new="passed")
    commits(docs, "ada", ("docs/guide.md", 4, 0), message="docs: a typo")
    metrics(docs, "release", [400.0 + i for i in range(30)])
    metrics(docs, "baseline", [401.0 + i for i in range(30)])
    metrics(docs, "release", [0.001] * 30, name="error_rate")
    metrics(docs, "baseline", [0.001] * 30, name="error_rate")
    judged = judge_release(docs)
    signals = {s.name: s for s in judged.verdict.signals}
    assert signals["known_flaky_failures"].detail == (
        "checkout.PayTest::test_charge failed in 3 of the last 5 releases of checkout and "
        "failed and passed within the same release in 1 of them (known flaky)"
    )
    assert signals["metric_judge"].level == "none"
    # Its name says checkout (a payments word), yet a known-flaky failure is no high.
    assert judged.verdict.severity == "low"


def _pytest_report(target: Release, module: str, outcomes: dict[str, str]) -> None:
    cases = "".join(
        f'<testcase classname="{module}.TestTimed" name="{name}">'
        + ('<failure message="boom"/>' if outcome == "failed" else "")
        + "</testcase>"
        for name, outcome in outcomes.items()
    )
    xml = f'<testsuite name="pytest">{cases}</testsuite>'
    services.ingest_junit(target, io.BytesIO(xml.encode()), f"r-{target.version}.xml", API)


def test_a_renamed_test_file_keeps_its_tests_history() -> None:
    """A known-flaky test whose file git saw renamed in the range (100 % rename, old and new
    paths) is still known flaky, not "a new failure"."""
    outcomes = ["failed", "passed", "failed", "passed"]
    for day, outcome in enumerate(outcomes):
        earlier = release("signer", f"v1.{day}.0", day)
        _pytest_report(earlier, "tests.test_timed", {"test_max_age": outcome, "test_ok": "passed"})
    renamed = release("signer", "v1.9.0", 9)
    record = CommitRecord(
        sha="b" * 40,
        author_name="Ada",
        author_email="ada@example.com",
        authored_at=START,
        message="Rename the timed tests",
        files=(FileChangeRecord("tests/test_expiry.py", "tests/test_timed.py", 0, 0),),
        parents=("a" * 40,),
    )
    services.ingest_commits(renamed, [record], API)
    _pytest_report(renamed, "tests.test_expiry", {"test_max_age": "failed", "test_ok": "passed"})
    history = read_history(renamed)
    [test] = history.failing()
    assert test.label == "tests.test_expiry.TestTimed::test_max_age"
    assert test.failed_before and test.first_failed_in == "v1.0.0"
    assert [outcome for _, outcome in test.recent] == ["passed", "failed", "passed", "failed"]
    verdict = judge_release(renamed).verdict
    names = {s.name for s in verdict.signals}
    assert "known_flaky_failures" in names and "new_failures" not in names
