"""Reassess, the run page and Cancel, through the views."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client
from django.utils import timezone

from assessments import filing, tasks
from assessments import services as run_services
from releases.models import Conversation, Release, RunStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def release(make_release: Callable[..., Release]) -> Release:
    return make_release("v7.0.0", title="<b>bold</b>")


@pytest.fixture
def plain_client(django_user_model: type[User]) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_user("viewer", "", "pw"))
    return client


@pytest.fixture
def manager_client(django_user_model: type[User]) -> Client:
    user = django_user_model.objects.create_user("manager", "", "pw")
    user.groups.add(Group.objects.get(name="Release managers"))
    client = Client()
    client.force_login(user)
    return client


def test_reassess_needs_the_permission(plain_client: Client, release: Release) -> None:
    assert plain_client.post(f"/releases/{release.version}/reassess").status_code == 403
    assert not Conversation.objects.exists()


def test_reassess_shows_the_run_at_once(manager_client: Client, release: Release) -> None:
    response = manager_client.post(
        f"/releases/{release.version}/reassess", headers={"HX-Request": "true"}
    )
    run = Conversation.objects.get()
    assert response["HX-Redirect"] == f"/runs/{run.pk}/"
    again = manager_client.post(f"/releases/{release.version}/reassess")
    assert again.status_code == 302 and again["Location"] == f"/runs/{run.pk}/"
    page = manager_client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-status" class="status status-queued" data-status="queued"' in page
    assert f'ws-connect="/ws/runs/{run.pk}/"' in page
    assert 'id="run-cancel"' in page
    assert "<b>bold</b>" not in page


def test_reassess_needs_csrf(django_user_model: type[User], release: Release) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_superuser("boss", "", "pw"))
    assert client.post(f"/releases/{release.version}/reassess").status_code == 403


def test_a_plain_user_may_not_see_someone_elses_run(plain_client: Client, release: Release) -> None:
    run = run_services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    assert plain_client.get(f"/runs/{run.pk}/").status_code == 403


def test_cancel_from_the_run_page(manager_client: Client, release: Release) -> None:
    run = run_services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    response = manager_client.post(f"/runs/{run.pk}/cancel", headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert 'id="run-actions"' in response.content.decode()
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    page = manager_client.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-status="cancelled"' in page
    assert "ws-connect" not in page  # a finished run needs no socket
    assert 'data-kind="run_cancelled"' in page
    # No dead end: a cancelled run offers Retry, which starts a new run of the release.
    assert f'action="/releases/{release.version}/reassess"' in page
    assert 'id="run-retry">Retry</button>' in page
    retried = manager_client.post(f"/releases/{release.version}/reassess")
    new_run = Conversation.objects.exclude(pk=run.pk).get()
    assert retried["Location"] == f"/runs/{new_run.pk}/"


def test_a_failed_run_says_why_a_user_may_not_retry_it(
    django_user_model: type[User], release: Release
) -> None:
    run = run_services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    Conversation.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, error="model down")
    viewer = django_user_model.objects.create_user("watcher", "", "pw")
    viewer.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_conversation", "view_release"])
    )
    client = Client()
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'disabled aria-describedby="run-retry-why">Retry</button>' in page
    assert "<code>releases.run_assessment</code>" in page
    assert f'action="/releases/{release.version}/reassess"' not in page


def test_a_finished_run_leads_with_its_verdict_and_the_change(
    manager_client: Client, release: Release
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from releases.models import RiskReport

    now = timezone.now()
    RiskReport.objects.create(release=release, severity="medium", filed_at=now - timedelta(days=1))
    run = Conversation.objects.create(
        release=release,
        status=RunStatus.SUCCEEDED,
        started_at=now - timedelta(seconds=9),
        finished_at=now,
        input_tokens=1200,
        output_tokens=80,
    )
    run_services.append_event(
        run,
        kind="usage",
        payload={
            "kind": "usage",
            "step": 1,
            "input_tokens": 1200,
            "output_tokens": 80,
            "cost_usd": None,
        },
    )
    RiskReport.objects.create(
        release=release,
        conversation=run,
        severity="high",
        policy_severity="high",
        findings=["<i>2 refund tests fail</i>"],
        needs_review=True,
        review_reasons=["An ungrounded finding."],
    )
    page = manager_client.get(f"/runs/{run.pk}/").content.decode()
    header = page[page.index("<h1>") : page.index("</h1>")]
    assert 'badge badge-high badge-large">High risk</span>' in header
    assert "Medium → High" in header
    assert 'id="run-duration">took 9' in page
    assert "An ungrounded finding." in page and "in the review queue" in page
    assert "&lt;i&gt;2 refund tests fail&lt;/i&gt;" in page
    assert "price unknown" in page


def test_a_failed_eval_trial_says_so_and_shows_the_checks_that_failed(
    admin_client: Client,
) -> None:
    from tests.eval_data import make_run, suite

    scenario = suite().get("high_payment_failures")
    run = make_run({scenario.id: ["failed"]}, scenarios=[scenario], trials=1, conversations=True)
    trial = run.results.get()
    page = admin_client.get(f"/runs/{trial.conversation_id}/").content.decode()
    header = page[page.index("<h1>") : page.index("</h1>")]
    assert 'class="ev-trial-verdict ev-trial-failed">FAILED</span>' in header
    assert "Why the trial failed" in page
    assert "decision_quality: severity acceptable (low)" in page
    assert '<td data-label="Check">severity acceptable</td>' in page
    # A trial's page belongs to the Evals tab, and a trial is not retried from here.
    assert '<a href="/evals/" aria-current="page">Evals</a>' in page
    assert 'href="/releases/" aria-current="page"' not in page
    assert "Retry" not in page


@pytest.mark.parametrize(("with_root", "arriving"), [(False, True), (True, False)])
def test_a_run_that_just_ended_says_its_trace_is_still_arriving_and_refreshes_it(
    manager_client: Client,
    release: Release,
    monkeypatch: pytest.MonkeyPatch,
    with_root: bool,
    arriving: bool,
) -> None:
    from assessments import views as run_views
    from assessments.trace_view import build_waterfall

    trace_id = "0af7651916cd43dd8448eb211c80319c"
    spans = [_span(trace_id, "s1", "POST api/risk-reports")]
    if with_root:
        spans.append(_span(trace_id, "w0", "invoke_workflow assessment"))
    monkeypatch.setattr(run_views, "load_waterfall", lambda _id: build_waterfall(_id, spans))
    run = run_services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    Conversation.objects.filter(pk=run.pk).update(
        status=RunStatus.SUCCEEDED, trace_id=trace_id, finished_at=timezone.now()
    )
    page = manager_client.get(f"/runs/{run.pk}/").content.decode()
    assert ("Trace still arriving: 1 span so far" in page) is arriving
    assert ('hx-trigger="every 2s" hx-select="#run-trace"' in page) is arriving
    # Long after the end, a trace without its root is what there is: no more waiting.
    Conversation.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(hours=1))
    assert "Trace still arriving" not in manager_client.get(f"/runs/{run.pk}/").content.decode()


def _span(trace_id: str, span_id: str, name: str) -> dict[str, object]:
    start = 1_700_000_000_000_000_000
    return {
        "name": name,
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": None,
        "start_time_unix_nano": start,
        "end_time_unix_nano": start + 5_000_000,
        "status": {"status_code": "UNSET"},
        "attributes": {},
    }


def test_the_run_page_marks_the_policys_findings_the_model_left_out(
    make_release: Callable[..., Release], admin_client: Client
) -> None:
    risky = make_release(
        test_results={"passed": 90, "failed": 3, "skipped": 0, "failing_tests": ["test_pay"]},
        deployment_metrics={"error_rate": 0.09, "response_time_p95": 400},
    )
    run = Conversation.objects.create(release=risky, status=RunStatus.SUCCEEDED)
    checked = filing.file_checked_report(
        release=risky, severity="high", findings=["Error rate 9 %"], conversation=run
    )
    assert checked.report is not None and checked.report.policy_findings
    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert page.count('<span class="rv-flag rv-flag-policy"') == len(checked.report.policy_findings)


def test_the_run_page_says_what_the_model_read(manager_client: Client, release: Release) -> None:
    # Issue 40: a small model's run says plainly it had no drill-downs.
    run = run_services.start_assessment(release, None, enqueue=tasks.enqueue_assessment)
    page = manager_client.get(f"/runs/{run.pk}/").content.decode()
    assert "What the model read" not in page  # not known before the agent was built
    run.metadata = {
        **run.metadata,
        "prompt_profile": "small",
        "prompt_profile_reads": "No drill-downs. The <brief> view alone.",
    }
    run.save(update_fields=["metadata"])
    page = manager_client.get(f"/runs/{run.pk}/").content.decode()
    assert "What the model read" in page
    assert "Small profile ·</span> No drill-downs. The &lt;brief&gt; view alone." in page
