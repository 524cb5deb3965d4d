"""Ingestion into rows and the summary derived from them, on a real database."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pytest

from detective_client.records import CommitRecord, FileChangeRecord
from releases.models import Release, Service
from releases.services import new_policy_version
from risk.settings import PolicySettings
from sources import services, summary
from sources.models import Commit, Ingestion, IngestionToken, MetricSample, TestCase
from sources.parsers.openmetrics import parse_metrics
from sources.services import IngestError, Origin, ReleaseFields
from sources.services.metrics import prometheus_config

pytestmark = pytest.mark.django_db

ASSETS = Path(__file__).resolve().parents[1] / "tests" / "assets" / "junit"
API = Origin("api")


def release(version: str = "v1.0.0", service: str | None = None) -> Release:
    created, _ = services.upsert_release(ReleaseFields(version=version, service=service), API)
    return created


def junit(target: Release, name: str, origin: Origin = API) -> services.Ingested:
    with (ASSETS / name).open("rb") as stream:
        return services.ingest_junit(target, stream, name, origin)


def commit(sha: str, message: str, *files: FileChangeRecord, parents: int = 1) -> CommitRecord:
    return CommitRecord(
        sha=sha * 40,
        author_name="Ada",
        author_email="ada@example.com",
        authored_at=datetime(2026, 11, 20, 10, int(sha, 16), tzinfo=UTC),
        message=message,
        files=files,
        parents=tuple(str(i) * 40 for i in range(parents)),
    )


def test_a_release_is_created_then_updated_by_service_and_version() -> None:
    first, created = services.upsert_release(
        ReleaseFields(version="v2.0.0", service="Checkout", environment="production"), API
    )
    assert created and first.service.slug == "checkout" and first.environment == "production"
    again, created = services.upsert_release(
        ReleaseFields(version="v2.0.0", service="checkout", head_sha="abcdef1"), API
    )
    assert not created and again.pk == first.pk
    again.refresh_from_db()
    assert (again.environment, again.head_sha) == ("production", "abcdef1")
    # The same version of another service is another release; no service: the default one.
    other, created = services.upsert_release(ReleaseFields(version="v2.0.0"), API)
    assert created and other.pk != first.pk and other.service == Service.default()


def test_an_invalid_release_is_refused_with_the_field() -> None:
    with pytest.raises(IngestError, match="head_sha: A SHA is 7 to 64 hex digits") as caught:
        services.upsert_release(ReleaseFields(version="v1", head_sha="not-a-sha"), API)
    assert caught.value.status == 422
    with pytest.raises(IngestError, match="version"):
        services.upsert_release(ReleaseFields(version="v 1/2"), API)
    assert not Release.objects.exists()


def test_junit_reports_fill_the_summary_and_the_same_report_counts_once() -> None:
    target = release()
    first = junit(target, "TEST-com.example.checkout.PaymentServiceTest.xml")
    second = junit(target, "jest-junit.xml")
    assert first.created and second.created
    assert first.counts["test_cases"] == 8  # 5 tests, 3 of them rerun
    again = junit(target, "jest-junit.xml")
    assert not again.created and again.ingestion.pk == second.ingestion.pk
    assert TestCase.objects.filter(release=target).count() == 8 + 5
    target.refresh_from_db()
    tests = target.test_results
    assert tests is not None
    # Surefire: chargesCard passed, retriesOnGatewayTimeout flaky (passed), refundsPartially
    # failed, connectsToLedger error (failed), roundsJapaneseYen skipped; Jest: 3 passed,
    # 1 failed, 1 skipped.
    assert (tests["passed"], tests["failed"], tests["skipped"], tests["flaky"]) == (5, 3, 2, 1)
    assert set(tests["failing_tests"]) == {
        "com.example.checkout.PaymentServiceTest::refundsPartially",
        "com.example.checkout.PaymentServiceTest::connectsToLedger",
        "cart totals applies a discount code once::cart totals applies a discount code once",
    }
    assert tests["flaky_tests"] == [
        "com.example.checkout.PaymentServiceTest::retriesOnGatewayTimeout"
    ]


def test_a_rerun_is_a_new_attempt_and_a_pass_on_it_makes_the_test_flaky() -> None:
    target = release()
    failing = (
        b'<testsuite name="s"><testcase classname="c" name="t"><failure/></testcase></testsuite>'
    )
    passing = b'<testsuite name="s"><testcase classname="c" name="t"/></testsuite>'
    services.ingest_junit(target, io.BytesIO(failing), "run1.xml", API)
    target.refresh_from_db()
    assert target.test_results["failed"] == 1
    services.ingest_junit(target, io.BytesIO(passing), "run2.xml", API)
    attempts = list(TestCase.objects.order_by("attempt").values_list("attempt", "status"))
    assert attempts == [(1, "failed"), (2, "passed")]
    target.refresh_from_db()
    assert (target.test_results["passed"], target.test_results["failed"]) == (1, 0)
    assert target.test_results["flaky_tests"] == ["c::t"]


def test_a_malformed_report_stores_nothing_even_after_many_cases() -> None:
    target = release()
    cases = b'<testcase classname="c" name="t%d"/>'
    body = b"<testsuite>" + b"".join(cases % i for i in range(5000)) + b"<testcase></testsuite>"
    with pytest.raises(IngestError, match=r"broken\.xml, line 1: malformed XML") as caught:
        services.ingest_junit(target, io.BytesIO(body), "broken.xml", API)
    assert caught.value.status == 400
    assert not TestCase.objects.exists()
    assert not Ingestion.objects.filter(kind="junit").exists()
    target.refresh_from_db()
    assert target.test_results is None


def test_a_token_for_another_service_stores_nothing() -> None:
    checkout = Service.objects.create(name="Checkout", slug="checkout")
    token = IngestionToken.objects.create(name="ci", token_hash="x" * 64, service=checkout)
    other = release("v9", service="Search")
    with pytest.raises(IngestError, match="may ingest for Checkout only") as caught:
        services.release_for(other.version, "search", Origin("api", token=token))
    assert caught.value.status == 403
    with pytest.raises(IngestError) as caught:
        services.upsert_release(ReleaseFields("v3", service="Billing"), Origin("api", token))
    assert caught.value.status == 403
    assert not Service.objects.filter(slug="billing").exists()


def test_commits_fill_the_changes_and_are_classified() -> None:
    target = release()
    commits = [
        commit("1", "feat(payments)!: charge in cents", FileChangeRecord("pay.py", None, 30, 2)),
        commit("2", "fix: typo", FileChangeRecord("docs/a.md", "docs/b.md", 1, 1)),
        commit("3", "Add logo", FileChangeRecord("logo.png", None, None, None)),
        commit("4", "Merge branch 'x'", parents=2),
    ]
    first = services.ingest_commits(target, commits, API)
    assert first.counts == {"commits": 4, "already_stored": 0, "merges": 1, "files": 3}
    assert not services.ingest_commits(target, commits, API).created
    stored = {c.sha[0]: c for c in Commit.objects.prefetch_related("files")}
    assert (stored["1"].change_type, stored["1"].scope, stored["1"].breaking) == (
        "feat",
        "payments",
        True,
    )
    assert stored["3"].change_type == "other"
    logo = stored["3"].files.get()
    assert logo.binary and logo.added is None
    assert stored["2"].files.get().old_path == "docs/b.md"
    target.refresh_from_db()
    assert target.changes == [
        f"feat(payments)!: charge in cents ({'1' * 7})",
        f"fix: typo ({'2' * 7})",
        f"Add logo ({'3' * 7})",
    ]


def test_a_rebuild_is_a_release_with_no_changes() -> None:
    # No commits at all: both refs the same commit (the reader refuses swapped refs).
    target = release()
    result = services.ingest_commits(target, [], API)
    assert result.created and result.counts["commits"] == 0
    target.refresh_from_db()
    assert target.changes == [
        "No changes: a rebuild of the previous release's commit (the range holds no commit)"
    ]
    from risk.policy import evaluate

    verdict = evaluate(target.as_summary())
    assert "missing_changes" not in {s.name for s in verdict.signals}
    assert not any(s.name in ("risky_changes", "critical_paths") for s in verdict.signals)


def test_a_long_range_lists_the_riskiest_changes_after_the_counts() -> None:
    target = release()
    commits = [commit(f"{i % 16:x}", f"chore: tidy {i}") for i in range(16)]
    commits = [
        CommitRecord(f"{i:040x}", "A", "a@x", c.authored_at, c.message, (), ("0" * 40,))
        for i, c in enumerate(commits * 4)
    ]
    commits[10] = CommitRecord(
        "f" * 40, "A", "a@x", commits[10].authored_at, "feat(auth)!: new tokens", (), ("0" * 40,)
    )
    services.ingest_commits(target, commits, API)
    target.refresh_from_db()
    assert len(target.changes) == 41
    assert target.changes[0] == (
        "64 commits (63 chore, 1 feat; 1 breaking); the 40 riskiest are listed, riskiest "
        "first; 24 left out"
    )
    assert target.changes[1].startswith("feat(auth)!: new tokens")


def test_a_long_ranges_list_puts_the_failures_suspects_first_and_keeps_the_oldest_culprit() -> None:
    target = release()
    commits = [
        CommitRecord(
            f"{i:02x}" * 20,
            "A",
            "a@x",
            datetime(2026, 11, 20, i // 60, i % 60, tzinfo=UTC),
            f"Tidy {i}",
            (),
            ("0" * 40,),
        )
        for i in range(60)
    ]
    services.ingest_commits(target, commits, API)
    junit(target, "jest-junit.xml")
    # The oldest commit is a failure's first suspect, the second oldest another's second.
    case = TestCase.objects.filter(release=target, status="failed").first()
    assert case is not None
    # As the ranking stores them (the stored verdict's policy judgement reads them whole).
    ranked = [
        {
            "sha": sha * 20,
            "subject": f"Tidy {int(sha)}",
            "author": "A",
            "tier": "touched",
            "path": "src/x.py",
            "line": None,
            "distance": None,
            "reason": "touched the file",
        }
        for sha in ("00", "01")
    ]
    case.suspects = {"ranked": ranked}
    case.save(update_fields=["suspects"])
    summary.rank_changes_again(target)
    target.refresh_from_db()
    assert target.changes[0].endswith(
        "riskiest first, the 2 suspects of failures first; 20 left out"
    )
    # The suspects first (the oldest two), then the newest: "Tidy 19" and older left out.
    assert target.changes[1:4] == ["Tidy 0 (0000000)", "Tidy 1 (0101010)", "Tidy 59 (3b3b3b3)"]
    assert not any(line.startswith("Tidy 19 ") for line in target.changes)


def test_metrics_of_both_windows_give_the_figures_and_nan_is_missing() -> None:
    target = release()
    text = (
        "# TYPE detective_error_rate gauge\n"
        "detective_error_rate 0.02 1763632800\n"
        "detective_error_rate 0.04 1763632860\n"
        "# TYPE detective_response_time_p95_ms gauge\n"
        "detective_response_time_p95_ms NaN 1763632800\n"
        "# EOF\n"
    )
    samples = parse_metrics(text, source="release.om")
    services.ingest_metrics(target, samples, API, file_names=["release.om"])
    baseline = parse_metrics(
        "# TYPE detective_response_time_p95_ms gauge\n"
        "detective_response_time_p95_ms 300 1763028000\n# EOF\n",
        source="baseline.om",
    )
    services.ingest_metrics(target, baseline, API, window="baseline")
    target.refresh_from_db()
    assert target.deployment_metrics == pytest.approx(
        {"error_rate": 0.03, "response_time_p95": None, "response_time_p95_baseline": 300.0}
    )
    assert MetricSample.objects.filter(value__isnull=True).count() == 1
    with pytest.raises(IngestError, match="window must be"):
        services.ingest_metrics(target, samples, API, window="yesterday")


def test_a_release_typed_by_hand_keeps_its_figures_until_a_source_of_that_kind_arrives() -> None:
    target = Release.objects.create(
        version="v5",
        changes=["Hand-written change"],
        test_results={"passed": 3, "failed": 0, "skipped": 0},
    )
    junit(target, "TEST-com.example.checkout.CartTest.xml")
    target.refresh_from_db()
    assert target.changes == ["Hand-written change"]
    assert target.test_results["passed"] == 2


def test_a_metrics_file_is_split_by_the_deploy_time_when_no_window_is_named() -> None:
    deployed = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    target, _ = services.upsert_release(ReleaseFields("v7", deployed_at=deployed), API)
    during, week_before = int(deployed.timestamp()) + 600, int(deployed.timestamp()) - 7 * 86400
    text = (
        "# TYPE detective_error_rate gauge\n"
        f"detective_error_rate 0.05 {during}\n"
        f"detective_error_rate 0.01 {week_before + 600}\n"
        f"detective_error_rate 0.9 {during + 86400}\n"  # in neither window: left out
        "# EOF\n"
    )
    results = services.ingest_metrics_file(target, parse_metrics(text, source="m.om"), API)
    assert [r.counts["window"] for r in results] == ["release", "baseline"]
    target.refresh_from_db()
    assert target.deployment_metrics["error_rate"] == pytest.approx(0.05)
    assert target.deployment_metrics["error_rate_baseline"] == pytest.approx(0.01)
    assert MetricSample.objects.filter(release=target).count() == 2


def test_a_report_without_tests_means_none_ran_not_missing() -> None:
    target = release()
    empty = io.BytesIO(b'<?xml version="1.0"?>\n<testsuites tests="0"/>\n')
    services.ingest_junit(target, empty, "empty.xml", API)
    target.refresh_from_db()
    assert target.test_results is not None
    tests = target.test_results
    assert (tests["passed"], tests["failed"], tests["skipped"]) == (0, 0, 0)


def test_the_summary_gives_a_mean_of_samples_to_four_significant_digits() -> None:
    target = release()
    p95 = [401.1, 402.2, 401.615]  # mean 401.6383...
    rates = [0.000991, 0.000993, 0.000994]  # mean 0.00099266...
    text = "".join(
        f"detective_response_time_p95_ms {value} {1763632800 + 60 * i}\n"
        for i, value in enumerate(p95)
    ) + "".join(
        f"detective_error_rate {value} {1763632800 + 60 * i}\n" for i, value in enumerate(rates)
    )
    samples = parse_metrics(
        "# TYPE detective_response_time_p95_ms gauge\n" + text + "# EOF\n", source="m.om"
    )
    services.ingest_metrics(target, samples, API)
    target.refresh_from_db()
    assert target.deployment_metrics["response_time_p95"] == 401.6
    assert target.deployment_metrics["error_rate"] == 0.0009927


def test_a_services_own_metric_names_come_from_the_policy_for_files_and_prometheus() -> None:
    # An exporter whose p95 gauge is `..._latency_p95_ms`: "p95 missing" on every release
    # until the service's names say which series it is.
    text = "# TYPE shop_latency_p95_ms gauge\nshop_latency_p95_ms 250\n"
    plain = release("v1", service="other")
    services.ingest_metrics_file(plain, parse_metrics(text, source="m.txt"), API)
    plain.refresh_from_db()
    assert plain.deployment_metrics["response_time_p95"] is None

    new_policy_version(
        PolicySettings(
            metric_names={
                "shop": {
                    "p95_gauges": [{"name": "shop_latency_p95_ms"}],
                    "prometheus": {"response_time_p95": "max(shop_latency_p95_ms)"},
                }
            }
        )
    )
    shop = release("v1", service="shop")
    services.ingest_metrics_file(shop, parse_metrics(text, source="m.txt"), API)
    shop.refresh_from_db()
    assert shop.deployment_metrics["response_time_p95"] == 250.0
    assert prometheus_config("shop").default.response_time_p95 == "max(shop_latency_p95_ms)"
    # Other services keep the defaults.
    assert "histogram_quantile" in prometheus_config("other").default.response_time_p95
