"""Admin smoke test: every registered model's changelist, add and change pages render."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.db import models
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils import timezone
from django_tasks import task

from assessments import filing
from assessments import services as run_services
from evals.models import EvalResult, EvalRun
from releases import services
from releases.models import Conversation, RunStatus
from review import services as review_services

MODELS = sorted(admin.site._registry, key=lambda model: model._meta.label)
IDS = [model._meta.label for model in MODELS]


@task()
def noop() -> None:
    """A task to enqueue so that the task result admin has a row to show."""


@pytest.fixture
def one_of_each(db: None, admin_user: object) -> None:
    now = timezone.now()
    release = services.create_release(
        version="v2.1.0",
        title="Payment processing",
        changes=["Added payment processing"],
        test_results={"passed": 142, "failed": 2, "skipped": 5, "failing_tests": ["t1", "t2"]},
        deployment_metrics={"error_rate": 0.02, "response_time_p95": 450},
    )
    services.create_release(version="v2.2.0")  # everything missing
    conversation = Conversation.objects.create(
        release=release,
        status=RunStatus.SUCCEEDED,
        provider="anthropic",
        model="claude",
        system_prompt="You are the Detective.",
        input_tokens=1000,
        output_tokens=200,
        started_at=now - timedelta(seconds=5),
        finished_at=now,
        metadata={"strategy": "direct"},
    )
    run_services.append_message(conversation, role="user", content="Assess v2.1.0 <script>")
    run_services.append_message(
        conversation,
        role="assistant",
        tool_calls=[{"id": "c1", "name": "get_release_summary", "arguments": {"release_id": "x"}}],
    )
    run_services.append_event(conversation, kind="run_started", payload={"release": "v2.1.0"})
    report = filing.file_risk_report(
        release=release,
        severity="high",
        findings=["Two failing tests in payments"],
        summary="Hold it.",
        conversation=conversation,
    )
    review_services.decide_report(
        report, None, decision="override", severity="low", reason="Flaky."
    )
    run = EvalRun.objects.create(
        suite_version="1",
        provider="anthropic",
        model="claude",
        summary={"pass_rate": 0.85},
        is_baseline=True,
    )
    EvalResult.objects.create(
        run=run,
        scenario_id="high_risk",
        trial=1,
        scores={"tool_usage": 1},
        passed=True,
        conversation=conversation,
    )
    Group.objects.get_or_create(name="Release managers")
    noop.enqueue()
    from sources.services import Origin, ReleaseFields, create_token, upsert_release

    token, _secret = create_token("ci", None)
    upsert_release(ReleaseFields(version="v2.1.0", environment="production"), Origin("api", token))
    from webhooks.models import Event, WebhookDelivery, WebhookEndpoint

    hook = WebhookEndpoint.objects.create(
        name="chat", url="https://hooks.example/d", secret="whsec-0123456789abcdef"
    )
    WebhookDelivery.objects.create(
        endpoint=hook, event=Event.FILED, service="default", version="v2.1.0", attempt=1
    )


def test_every_model_of_both_apps_is_in_the_admin() -> None:
    labels = {model._meta.label for model in MODELS}
    assert {
        "releases.Release",
        "releases.Conversation",
        "releases.Message",
        "releases.AgentEvent",
        "releases.RiskReport",
        "evals.EvalRun",
        "evals.EvalResult",
    } <= labels


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_changelist_add_and_change_pages_render(
    admin_client: Client, one_of_each: None, model: type[models.Model]
) -> None:
    info = f"admin:{model._meta.app_label}_{model._meta.model_name}"
    model_admin = admin.site._registry[model]

    response = admin_client.get(reverse(f"{info}_changelist"))
    assert response.status_code == 200
    if model_admin.search_fields:
        assert admin_client.get(reverse(f"{info}_changelist"), {"q": "v2"}).status_code == 200

    response = admin_client.get(reverse(f"{info}_add"))
    can_add = model_admin.has_add_permission(response.wsgi_request)
    assert response.status_code == (200 if can_add else 403)

    instance = model._default_manager.first()
    assert instance is not None, f"no {model._meta.label} to show"
    response = admin_client.get(reverse(f"{info}_change", args=[instance.pk]))
    assert response.status_code == 200


def test_release_change_page_is_readable(admin_client: Client, one_of_each: None) -> None:
    release_admin = reverse("admin:releases_release_changelist")
    page = admin_client.get(release_admin).content.decode()
    assert "high</span>" in page  # the latest severity, as a badge
    assert "missing" in page  # v2.2.0 has no data; it is not shown as zero

    conversation = Conversation.objects.get()
    page = admin_client.get(
        reverse("admin:releases_conversation_change", args=[conversation.pk])
    ).content.decode()
    assert "Assess v2.1.0 &lt;script&gt;" in page  # messages inline, escaped
    assert "get_release_summary" in page  # tool calls, pretty-printed
    assert "run_started" in page  # events inline
    assert reverse("admin:releases_release_change", args=[conversation.release_id]) in page


@pytest.mark.parametrize("severity", ["high", "medium", "low", "none"])
def test_releases_can_be_filtered_by_latest_risk(
    admin_client: Client, one_of_each: None, severity: str
) -> None:
    response = admin_client.get(
        reverse("admin:releases_release_changelist"), {"latest_severity": severity}
    )
    assert response.status_code == 200
    shown = {release.version for release in response.context["cl"].result_list}
    from releases.models import Release

    # v2.2.0 has no report: it is not assessed, and counts with the gate's verdict, the
    # policy's on its (missing) data, as the release list counts it.
    by_policy = Release.objects.get(version="v2.2.0").verdict_severity
    assert by_policy in {"low", "medium", "high"}
    expected = {"none": {"v2.2.0"}, by_policy: {"v2.2.0"}}
    # The severity that counts: the model filed high, a person overrode it to low.
    expected.setdefault("low", set()).add("v2.1.0")
    assert shown == expected.get(severity, set())


@pytest.mark.parametrize("version", ["v1/2", "<script>x</script>", "v 1", "v" * 65])
@pytest.mark.django_db
def test_the_admin_form_refuses_a_release_version_outside_the_format(
    rf: RequestFactory, admin_user: object, version: str
) -> None:
    from releases.models import Release

    request = rf.get("/admin/releases/release/add/")
    request.user = admin_user
    form_class = admin.site._registry[Release].get_form(request)
    from releases.models import Service

    data = {
        "service": Service.default().pk,
        "version": version,
        "title": "",
        "created_at_0": "2026-11-24",
        "created_at_1": "10:00",
    }
    form = form_class(data)
    assert not form.is_valid()
    assert "version" in form.errors
    assert form_class({**data, "version": "v1.2.3+build_7"}).is_valid()


def test_the_export_action_writes_the_selected_labels_as_scenarios(
    admin_client: Client, one_of_each: None, settings, tmp_path
) -> None:
    from evals.scenario import load_suite
    from releases.models import ReviewDecision

    settings.DETECTIVE_REVIEW_SCENARIOS_DIR = tmp_path
    decision = ReviewDecision.objects.get()
    changelist = reverse("admin:releases_reviewdecision_changelist")
    response = admin_client.post(
        changelist,
        {"action": "export_scenarios", "_selected_action": [decision.pk]},
        follow=True,
    )
    assert "Exported 1 scenario(s)" in response.content.decode()
    decision.refresh_from_db()
    (loaded,) = load_suite(pattern="tag:from-review", extra_dirs=[tmp_path]).scenarios
    assert loaded.id == decision.scenario_id
    assert loaded.expect.severity == "low"
    page = admin_client.get(changelist).content.decode()
    assert decision.scenario_id in page
