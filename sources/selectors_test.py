"""The release page's detail from the sources: tabs, filters, pages, the metric judge's words,
and release text escaped (sources/selectors.py, shown by sources/release_page.py)."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Group, User
from django.http import QueryDict
from django.test import Client

from detective_client.records import CommitRecord, FileChangeRecord
from releases.models import Release
from sources import selectors, services
from sources.parsers.openmetrics import parse_metrics
from sources.services import Origin, ReleaseFields

pytestmark = pytest.mark.django_db

API = Origin("api")
SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def junit_report(passed: int, failed: int) -> bytes:
    cases = [
        f'<testcase classname="shop.CartTest" name="passes_{n:03d}" time="0.01"/>'
        for n in range(passed)
    ]
    cases += [
        f'<testcase classname="shop.PayTest" name="fails_{n} &lt;b&gt;" time="0.2">'
        f'<failure message="expected 90 {SCRIPT.replace("<", "&lt;")}" type="AssertionError">'
        "stack</failure></testcase>"
        for n in range(failed)
    ]
    return f'<testsuite name="shop">{"".join(cases)}</testsuite>'.encode()


@pytest.fixture
def release() -> Release:
    made, _ = services.upsert_release(ReleaseFields(version="v9.0.0", service="shop-api"), API)
    services.ingest_junit(made, io.BytesIO(junit_report(120, 3)), "a.xml", API)
    return made


@pytest.fixture
def viewer() -> Client:
    user = User.objects.create_user("rm", password="x")
    user.groups.add(Group.objects.get(name="Release managers"))
    client = Client()
    client.force_login(user)
    return client


def test_the_tests_tab_shows_the_failures_first_escaped_and_paged(
    release: Release, viewer: Client
) -> None:
    page = viewer.get(release.get_absolute_url()).content.decode()
    assert 'id="release-sections"' in page
    assert "fails_0 &lt;b&gt;" in page and ESCAPED in page and SCRIPT not in page
    assert "passes_000" not in page  # failures are the default while there are any
    everything = viewer.get(release.get_absolute_url(), {"status": "all"}).content.decode()
    assert "1\u201350 of 123 test cases" in everything and "passes_000" in everything
    third = viewer.get(release.get_absolute_url(), {"status": "all", "page": 3}).content.decode()
    assert "101\u2013123 of 123" in third and "passes_100" in third and "passes_000" not in third
    found = viewer.get(
        release.get_absolute_url(), {"status": "passed", "q": "passes_11"}
    ).content.decode()
    assert "1\u201310 of 10 test cases" in found


def test_an_htmx_request_gets_only_the_sections_and_the_address_follows(
    release: Release, viewer: Client
) -> None:
    response = viewer.get(
        release.get_absolute_url(),
        {"status": "passed", "page": 2},
        headers={"HX-Request": "true", "HX-Target": "release-sections"},
    )
    body = response.content.decode()
    assert body.lstrip().startswith("<section") and "<html" not in body
    assert "51\u2013100 of 120" in body
    assert response["HX-Push-Url"].endswith("?status=passed&page=2")


def test_commits_show_their_type_and_lines_and_metrics_the_judges_sentence(
    release: Release, viewer: Client
) -> None:
    when = datetime(2026, 11, 20, 10, tzinfo=UTC)
    services.ingest_commits(
        release,
        [
            CommitRecord(
                "a" * 40,
                f"Ada {SCRIPT}",
                "ada@example.com",
                when,
                "feat(pay)!: charge in cents",
                (
                    FileChangeRecord("pay.py", None, 30, 2),
                    FileChangeRecord("logo.png", None, None, None),
                ),
                ("0" * 40,),
            )
        ],
        API,
    )
    lines = ["# TYPE error_rate gauge"]
    lines += [f"error_rate {0.01 + n / 10_000} {1763632800 + n * 60}" for n in range(30)]
    services.ingest_metrics(
        release, parse_metrics("\n".join([*lines, "# EOF"]), source="b.om"), API, window="baseline"
    )
    lines = ["# TYPE error_rate gauge"]
    lines += [f"error_rate {0.08 + n / 10_000} {1764237600 + n * 60}" for n in range(30)]
    lines += ["error_rate NaN 1764239600"]
    services.ingest_metrics(
        release, parse_metrics("\n".join([*lines, "# EOF"]), source="r.om"), API
    )
    commits = viewer.get(release.get_absolute_url(), {"tab": "commits"}).content.decode()
    assert "feat(pay)" in commits and "breaking" in commits and "+30" in commits
    assert f"Ada {ESCAPED}" in commits and "binary" in commits
    metrics = viewer.get(release.get_absolute_url(), {"tab": "metrics"}).content.decode()
    assert "Error rate rose from a median of 1.15 % to 8.14 % over 30 samples each" in metrics
    assert "median of 30" in metrics and "1 sample without a value" in metrics


def test_a_release_without_detail_says_so(viewer: Client) -> None:
    typed, _ = services.upsert_release(ReleaseFields(version="v1.0.0"), API)
    sections = selectors.release_sections(typed, QueryDict())
    assert sections.tab == "" and sections.tab_links == []
    assert "No detail" in viewer.get(typed.get_absolute_url()).content.decode()


def exporter_text(start: int, errors: list[int]) -> str:
    """prometheus_client's counter by `code`, one scrape a minute (the text format's ms)."""
    lines = ["# TYPE http_requests_total counter"]
    ok = bad = 0
    for minute, failed in enumerate(errors):
        ok, bad = ok + 1000 - failed, bad + failed
        stamp = (start + 60 * minute) * 1000
        lines += [
            f'http_requests_total{{code="200"}} {ok} {stamp}',
            f'http_requests_total{{code="500"}} {bad} {stamp}',
        ]
    return "\n".join(lines) + "\n"


def test_the_metrics_tab_says_what_the_policy_says_never_pass_beside_rose(viewer: Client) -> None:
    # 0.3 % -> 1.1 % from an exporter's counters: once "The metrics pass against the
    # baseline: 4 of 4" (raw counters' medians compared) beside a report that said it rose.
    deployed = datetime(2026, 11, 20, 10, tzinfo=UTC)
    made, _ = services.upsert_release(
        ReleaseFields(version="v9.1.0", service="shop-api", deployed_at=deployed), API
    )
    start = int(deployed.timestamp())
    text = exporter_text(start - 7 * 86400, [3, 2, 4] * 10) + exporter_text(
        start, [11, 10, 12] * 10
    ).replace("# TYPE http_requests_total counter\n", "")
    services.ingest_metrics_file(made, parse_metrics(text, source="m.prom"), API)
    page = viewer.get(made.get_absolute_url(), {"tab": "metrics"}).content.decode()
    assert "The metrics raise the release to high" in page
    assert "rose · high" in page
    assert "3.7 times the baseline" in page
    assert "The metrics pass" not in page
    # The deploy time is known and the baseline was found: no note about either.
    assert "no deploy time" not in page and "No baseline" not in page


def test_the_metrics_tab_says_when_there_is_no_deploy_time(viewer: Client) -> None:
    made, _ = services.upsert_release(ReleaseFields(version="v9.2.0", service="shop-api"), API)
    text = exporter_text(1763632800, [3] * 30)
    services.ingest_metrics_file(made, parse_metrics(text, source="m.prom"), API)
    page = viewer.get(made.get_absolute_url(), {"tab": "metrics"}).content.decode()
    assert "The release has no deploy time" in page
    assert "The metrics pass" not in page


def test_a_failure_shows_its_traceback_folded_and_escaped(viewer: Client) -> None:
    made, _ = services.upsert_release(ReleaseFields(version="v9.1.0", service="shop-api"), API)
    report = (
        b'<testsuite name="pytest"><testcase classname="tests.test_timed" name="test_max_age">'
        b'<failure message="Failed: DID NOT RAISE SignatureExpired">def test_max_age():\n'
        b"&gt;       with pytest.raises(SignatureExpired):"
        b"  # &lt;script&gt;alert(1)&lt;/script&gt;\n"
        b"tests/test_timed.py:107: Failed</failure></testcase></testsuite>"
    )
    services.ingest_junit(made, io.BytesIO(report), "r.xml", API)
    page = viewer.get(made.get_absolute_url()).content.decode()
    assert '<details class="src-traceback">' in page
    assert "tests/test_timed.py:107: Failed" in page
    assert "DID NOT RAISE SignatureExpired" in page
    assert ESCAPED in page and SCRIPT not in page


def test_xfailed_and_tests_only_in_the_header_are_said_on_the_page(viewer: Client) -> None:
    made, _ = services.upsert_release(ReleaseFields(version="v9.2.0", service="shop-api"), API)
    report = (
        b'<testsuites><testsuite name="pytest" tests="760"><testcase classname="t" name="a"/>'
        b'<testcase classname="t" name="b"><skipped type="pytest.xfail" message="known"/>'
        b"</testcase></testsuite></testsuites>"
    )
    services.ingest_junit(made, io.BytesIO(report), "r.xml", API)
    page = viewer.get(made.get_absolute_url()).content.decode()
    assert "1 expected to fail (xfailed)" in page
    assert "count 758 more tests than their test cases" in page
