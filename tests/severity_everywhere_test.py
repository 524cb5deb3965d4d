"""One severity that counts, everywhere (issue 21, item 2): a release whose report waits for
review with the model's low and the policy's high shows High on every page and in every
answer that shows its severity, and is counted, filtered and sorted as high."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from assessments import filing
from releases.models import Conversation, Release, RiskReport, RunStatus
from releases.stored_verdict import refresh_stored_verdict

pytestmark = pytest.mark.django_db

VERSION = "v2.4.1"


# The review box's counted severity (its own element, with the report's id since issue 37).
COUNTS_HIGH = re.compile(
    r'rv-counts" id="counts-\d+"><span class="muted small">Counts</span> '
    r'<span class="badge badge-high"'
)


@pytest.fixture
def waiting(make_release: Callable[..., Release]) -> RiskReport:
    make_release("v2.4.0")  # a release that is not assessed, for the filters
    release = make_release(
        VERSION,
        changes=["Encrypt stored tokens"],
        test_results={"passed": 130, "failed": 12, "skipped": 0, "failing_tests": ["test_login"]},
        deployment_metrics={"error_rate": 0.09, "response_time_p95": 480},
    )
    now = timezone.now()
    run = Conversation.objects.create(
        release=release,
        status=RunStatus.SUCCEEDED,
        started_at=now - timedelta(seconds=5),
        finished_at=now,
        outcome="kept_refused",
    )
    report = filing.file_risk_report(
        release=release, severity="low", findings=["The release looks fine."], conversation=run
    )
    RiskReport.objects.filter(pk=report.pk).update(
        needs_review=True, review_reasons=["severity low is below the policy's high"]
    )
    refresh_stored_verdict(release)  # a bare update() skips the stored verdict's hooks
    report.refresh_from_db()
    assert (report.severity, report.policy_severity) == ("low", "high")
    return report


def between(page: str, start: str, end: str) -> str:
    first = page.index(start)
    return page[first : page.index(end, first)]


def test_every_page_and_answer_shows_high(
    admin_client: Client, waiting: RiskReport, settings: object
) -> None:
    run = waiting.conversation
    assert run is not None

    home = admin_client.get("/").content.decode()
    assert re.search(r'stat-high"[^>]*><span class="stat-value">1<', home)
    assert VERSION in between(home, 'id="high-risk', "</section>")
    assert 'class="trend-high"' in between(home, 'id="severity-trend"', "</section>")

    listing = admin_client.get("/releases/").content.decode()
    row = between(listing, f">{VERSION}<", "</tr>")
    assert 'badge badge-high">High</span>' in row
    assert VERSION in admin_client.get("/releases/?severity=high").content.decode()
    assert f">{VERSION}<" not in admin_client.get("/releases/?severity=low").content.decode()
    by_risk = admin_client.get("/releases/?sort=-risk").content.decode()
    assert by_risk.index(f">{VERSION}<") < by_risk.index(">v2.4.0<")

    page = admin_client.get(f"/releases/{VERSION}/").content.decode()
    header = between(page, "<h1>", "</h1>")
    assert 'badge badge-high badge-large" id="release-severity">High risk</span>' in header
    assert "model low · policy high" in header
    assert 'class="card report report-high"' in page  # the report card's stripe
    assert 'class="dot dot-high"' in page  # the release's risk chart
    assert COUNTS_HIGH.search(page)

    run_page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    run_header = between(run_page, "<h1>", "</h1>")
    assert 'badge badge-high badge-large">High risk</span>' in run_header
    assert "model low · policy high" in run_header
    assert "Stored for review: the model did not correct its filing" in run_page
    assert 'class="card report report-high" id="run-report"' in run_page

    desk = admin_client.get("/review/").content.decode()
    assert COUNTS_HIGH.search(desk)

    admin_releases = admin_client.get("/admin/releases/release/").content.decode()
    assert ">high<" in between(admin_releases, f">{VERSION}<", "</tr>")
    admin_reports = admin_client.get("/admin/releases/riskreport/").content.decode()
    assert ">high<" in between(admin_reports, 'class="field-counts_badge"', "</td>")

    api = admin_client.get(f"/api/releases/{VERSION}/verdict").json()
    assert (api["severity"], api["model_severity"], api["policy_severity"]) == (
        "high",
        "low",
        "high",
    )

    out = io.StringIO()
    with pytest.raises(SystemExit) as ended:
        call_command("verdict", VERSION, "--json", stdout=out)
    assert ended.value.code == 2
    assert json.loads(out.getvalue())["severity"] == "high"
