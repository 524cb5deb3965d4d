from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from releases.models import Release, ReviewDecision, RiskReport
from review import services

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def report(make_release: Callable[..., Release]) -> RiskReport:
    release = make_release("v2.1.0", title="Refunds")
    return RiskReport.objects.create(
        release=release,
        severity="medium",
        policy_severity="high",
        findings=["1 refund test failed", f"Model said {SCRIPT}"],
        grounding=[
            {
                "where": "findings[0]",
                "text": "1 refund test failed",
                "evidence": ["tests.failing_tests[0] = test_refund_partial"],
                "problems": [],
                "signals": ["failed_tests"],
                "grounded": True,
            }
        ],
        signals=[
            {
                "name": "critical_area_failures",
                "label": "Failed tests in a critical area",
                "level": "high",
                "critical": True,
                "figure": 1,
                "threshold": "high from 1 failing test in payments",
                "detail": "1 failing test in payments: test_refund_partial",
                "needs_review": False,
                "areas": ["payments"],
            }
        ],
        needs_review=True,
        review_reasons=["The model filed medium where the policy says high."],
    )


def reviewer_client(django_user_model: type[User], *, may_review: bool = True) -> Client:
    user = django_user_model.objects.create(username="rm" if may_review else "viewer")
    # Reading releases and reports needs the view permissions (the Release managers have them).
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_release", "view_riskreport"])
    )
    if may_review:
        user.user_permissions.add(Permission.objects.get(codename="review_report"))
    client = Client()
    client.force_login(user)
    return client


def test_the_queue_shows_the_report_with_its_evidence_and_escapes_the_model(
    report: RiskReport, django_user_model: type[User]
) -> None:
    page = reviewer_client(django_user_model).get(reverse("releases:review")).content.decode()
    assert f'id="review-{report.pk}"' in page
    assert "The model filed medium where the policy says high." in page
    assert "tests.failing_tests[0] = test_refund_partial" in page
    assert "high from 1 failing test in payments" in page
    assert SCRIPT not in page and "&lt;script&gt;" in page
    assert "Accept the policy's High" in page and "Accept the model's Medium" in page
    assert "figures found in the data" in page  # what the check of the finding found


def test_the_queue_needs_a_login(client: Client, report: RiskReport) -> None:
    response = client.get(reverse("releases:review"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_deciding_needs_the_permission(report: RiskReport, django_user_model: type[User]) -> None:
    client = reviewer_client(django_user_model, may_review=False)
    url = reverse("releases:review_decide", args=[report.pk])
    assert client.post(url, {"accept": "high"}).status_code == 403
    assert "rv-accept" not in client.get(reverse("releases:review")).content.decode()
    assert not ReviewDecision.objects.exists()


def test_an_htmx_accept_answers_with_the_decision_and_empties_the_queue(
    report: RiskReport, django_user_model: type[User]
) -> None:
    client = reviewer_client(django_user_model)
    url = reverse("releases:review_decide", args=[report.pk])
    response = client.post(url, {"accept": "medium"}, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-review-state="accept"' in body and "accepted the model's" in body
    decision = ReviewDecision.objects.get()
    assert (decision.severity, decision.reviewer.username) == ("medium", "rm")
    assert "Nothing to review" in client.get(reverse("releases:review")).content.decode()


def test_an_override_without_a_reason_is_refused_with_the_form_kept(
    report: RiskReport, django_user_model: type[User]
) -> None:
    client = reviewer_client(django_user_model)
    url = reverse("releases:review_decide", args=[report.pk])
    response = client.post(
        url, {"decision": "override", "severity": "low"}, headers={"HX-Request": "true"}
    )
    body = response.content.decode()
    assert "an override needs a reason" in body
    assert 'data-review-state="open"' in body
    assert not ReviewDecision.objects.exists()


def test_an_override_shows_on_the_release_list_and_page_and_exports_a_scenario(
    report: RiskReport, django_user_model: type[User], settings, tmp_path: Path
) -> None:
    settings.DETECTIVE_REVIEW_SCENARIOS_DIR = tmp_path
    client = reviewer_client(django_user_model)
    url = reverse("releases:review_decide", args=[report.pk])
    client.post(
        url,
        {
            "decision": "override",
            "severity": "low",
            "reason": "The refund test is known to fail on the CI clock.",
            "wrong_finding": "0",
        },
        headers={"HX-Request": "true"},
    )
    decision = ReviewDecision.objects.get()
    assert (decision.severity, decision.wrong_finding) == ("low", "1 refund test failed")
    assert decision.is_override

    # One word for one thing: "decided", accepted or overridden, in the list and the page.
    listing = client.get(reverse("releases:list")).content.decode()
    assert 'class="badge badge-low">Low</span><span class="rv-mark rv-mark-decided"' in listing
    assert "decided (overridden)" in listing
    detail = client.get(reverse("releases:detail", args=["v2.1.0"])).content.decode()
    assert "decided (overridden)" in detail and "overridden to" in detail
    assert "known to fail on the CI clock" in detail
    assert "set by a person" not in detail and "Needs a person because" not in detail

    export = reverse("releases:review_export", args=[decision.pk])
    response = client.post(export, headers={"HX-Request": "true"})
    decision.refresh_from_db()
    assert decision.scenario_id in response.content.decode()
    written = tomllib.loads((tmp_path / f"{decision.scenario_id}.toml").read_text())
    assert written["expect"]["severity"] == "low"
    assert "from-review" in written["tags"]
    download = client.get(reverse("releases:review_scenario", args=[decision.pk]))
    assert download["Content-Disposition"].endswith(f'{decision.scenario_id}.toml"')
    assert tomllib.loads(download.content.decode()) == written


def test_the_home_page_counts_the_reports_to_review(
    report: RiskReport, django_user_model: type[User]
) -> None:
    client = reviewer_client(django_user_model)
    page = client.get("/").content.decode()
    assert 'id="review-card"><span class="stat-value">1</span>' in page
    services.decide_report(report, None, decision="accept", severity="high")
    page = client.get("/").content.decode()
    assert 'id="review-card"><span class="stat-value">0</span>' in page


@pytest.mark.django_db
def test_a_user_without_the_view_permissions_gets_403_from_the_desk(client: Client) -> None:
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_user("nobody", password="x" * 12))
    assert client.get("/review/").status_code == 403


def test_accepting_the_policys_verdict_takes_one_click_and_no_reason(
    report: RiskReport, django_user_model: type[User]
) -> None:
    client = reviewer_client(django_user_model)
    url = reverse("releases:review_decide", args=[report.pk])
    response = client.post(url, {"accept": "high"}, headers={"HX-Request": "true"})
    body = response.content.decode()
    decision = ReviewDecision.objects.get()
    assert (decision.decision, decision.severity, decision.reason) == ("accept", "high", "")
    assert "accepted the policy's" in body


def test_accepting_a_severity_neither_verdict_gave_is_refused(
    report: RiskReport, django_user_model: type[User]
) -> None:
    client = reviewer_client(django_user_model)
    url = reverse("releases:review_decide", args=[report.pk])
    body = client.post(url, {"accept": "low"}, headers={"HX-Request": "true"}).content.decode()
    assert "is an override, with a reason" in body
    assert not ReviewDecision.objects.exists()


def test_a_decision_updates_the_waiting_count_and_the_reasons_out_of_band(
    report: RiskReport, django_user_model: type[User]
) -> None:
    client = reviewer_client(django_user_model)
    desk = client.get(reverse("releases:review")).content.decode()
    assert 'id="review-count"><span class="stat-value">1</span>' in desk
    url = reverse("releases:review_decide", args=[report.pk])
    body = client.post(url, {"accept": "high"}, headers={"HX-Request": "true"}).content.decode()
    assert (
        '<p class="rv-count" id="review-count" hx-swap-oob="true">'
        '<span class="stat-value">0</span>' in body
    )
    assert f'id="reasons-{report.pk}" class="rv-reasons-slot" hx-swap-oob="true"' in body
    assert "Needs a person because" not in body


def test_the_decided_tab_lists_recent_decisions_with_who_and_why(
    report: RiskReport, django_user_model: type[User]
) -> None:
    client = reviewer_client(django_user_model)
    services.decide_report(
        report,
        django_user_model.objects.get(username="rm"),
        decision="override",
        severity="low",
        reason=f"Known flaky {SCRIPT}",
    )
    page = client.get(reverse("releases:review"), {"tab": "decided"}).content.decode()
    assert 'aria-current="page">Decided</a>' in page
    assert f'id="decision-{ReviewDecision.objects.get().pk}"' in page
    assert "overridden" in page and ">rm<" in page and "Known flaky" in page
    assert SCRIPT not in page
    waiting = client.get(reverse("releases:review")).content.decode()
    assert "Nothing to review" in waiting


def test_deciding_checks_the_csrf_token(report: RiskReport, django_user_model: type[User]) -> None:
    user = django_user_model.objects.create(username="csrf-rm")
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_release", "view_riskreport", "review_report"]
        )
    )
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    url = reverse("releases:review_decide", args=[report.pk])
    assert client.post(url, {"accept": "high"}, headers={"HX-Request": "true"}).status_code == 403
    assert not ReviewDecision.objects.exists()
    # With the token the desk's page carries, the same click is a decision.
    client.get(reverse("releases:review"))
    token = client.cookies["csrftoken"].value
    response = client.post(
        url, {"accept": "high"}, headers={"HX-Request": "true", "X-CSRFToken": token}
    )
    assert response.status_code == 200
    assert ReviewDecision.objects.get().severity == "high"


def test_a_card_names_its_service_and_the_desk_polls_the_open_items(
    report: RiskReport, django_user_model: type[User]
) -> None:
    page = reviewer_client(django_user_model).get(reverse("releases:review")).content.decode()
    assert f'<span class="rv-service">{report.release.service.name}</span>' in page
    assert f'hx-get="/review/?live={report.pk}" hx-trigger="every 5s" hx-swap="none"' in page


def test_a_decision_made_on_another_screen_reaches_the_desk_on_its_next_poll(
    report: RiskReport, django_user_model: type[User]
) -> None:
    RiskReport.objects.filter(pk=report.pk).update(pipeline_waiting_since=report.filed_at)
    desk = reviewer_client(django_user_model)

    def poll() -> str:
        answer = desk.get(
            reverse("releases:review"), {"live": str(report.pk)}, HTTP_HX_REQUEST="true"
        )
        assert answer.status_code == 200
        return answer.content.decode()

    before = poll()
    assert f'id="counts-{report.pk}" hx-swap-oob="true"' in before and ">High<" in before
    assert "Pipeline waiting" in before and f'id="review-{report.pk}"' not in before
    assert f'hx-get="/review/?live={report.pk}"' in before

    # Another release manager overrides it to Low.
    other = django_user_model.objects.create(username="other-rm")
    services.decide_report(report, other, decision="override", severity="low", reason="known")
    after = poll()
    counts = after[after.index(f'id="counts-{report.pk}"') :].split("</span></span>")[0]
    assert 'class="badge badge-low"' in counts and "High" not in counts
    assert "Pipeline waiting" not in after and "Pipeline told" in after
    assert f'id="review-{report.pk}" class="rv-box" data-review-state="override"' in after
    assert "by other-rm" in after
    # The item is decided: the next poll no longer asks for it; the count is 0.
    assert 'hx-get="/review/?live="' in after
    assert '<span class="stat-value">0</span>' in after


@pytest.mark.parametrize("ids", ["²", "99999999999999999999", "1,x,-3", ",", "1" * 5000])
def test_a_poll_with_ids_no_report_has_asks_for_nothing(
    report: RiskReport, django_user_model: type[User], ids: str
) -> None:
    answer = reviewer_client(django_user_model).get(
        reverse("releases:review"), {"live": ids}, HTTP_HX_REQUEST="true"
    )
    assert answer.status_code == 200
    assert 'id="review-live"' in answer.content.decode()


def test_a_report_asked_again_shows_the_earlier_decision_and_what_moved_since(
    report: RiskReport, django_user_model: type[User]
) -> None:
    grace = django_user_model.objects.create(username="grace")
    services.decide_report(report, grace, decision="override", severity="low", reason="flaky")
    RiskReport.objects.filter(pk=report.pk).update(filed_at=report.filed_at.replace(year=2025))
    again = RiskReport.objects.create(
        release=report.release,
        severity="high",
        policy_severity="high",
        findings=["3 refund tests failed"],
        signals=[{**report.signals[0], "figure": 3}],
        needs_review=True,
        review_reasons=["The verdict changed."],
    )
    page = reviewer_client(django_user_model).get(reverse("releases:review")).content.decode()
    card = page[page.index(f'id="queue-item-{again.pk}"') :]
    assert "Asked again." in card and "overridden to" in card and "by grace" in card
    assert "<q>flaky</q>" in card
    assert "<li>Failed tests in a critical area: 1 → 3</li>" in card
