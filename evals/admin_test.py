from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from evals.models import EvalRun
from tests.eval_data import make_run, suite

pytestmark = pytest.mark.django_db

WORSE = {"high_payment_failures": ["failed", "failed", "failed"]}


def scenarios() -> list:
    return [suite().get(i) for i in ("high_payment_failures", "low_clean_docs")]


def test_the_action_marks_one_run_as_the_baseline(admin_client: Client) -> None:
    old = make_run(scenarios=scenarios(), baseline=True)
    new = make_run(scenarios=scenarios())
    url = reverse("admin:evals_evalrun_changelist")
    response = admin_client.post(
        url, {"action": "mark_as_baseline", "_selected_action": [new.pk]}, follow=True
    )
    assert f"Run #{new.pk} is now the baseline." in response.content.decode()
    assert list(EvalRun.objects.filter(is_baseline=True)) == [new]
    old.refresh_from_db()
    assert not old.is_baseline
    both = admin_client.post(
        url, {"action": "mark_as_baseline", "_selected_action": [old.pk, new.pk]}, follow=True
    )
    assert "Choose exactly one run" in both.content.decode()
    assert list(EvalRun.objects.filter(is_baseline=True)) == [new]


def test_the_action_needs_the_permission(client: Client) -> None:
    staff = User.objects.create_user("staff", password="pw-12345678", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename="view_evalrun"))
    client.force_login(staff)
    make_run(scenarios=scenarios()[:1], trials=1)
    page = client.get(reverse("admin:evals_evalrun_changelist")).content.decode()
    assert "mark_as_baseline" not in page
    staff.user_permissions.add(Permission.objects.get(codename="mark_baseline"))
    page = client.get(reverse("admin:evals_evalrun_changelist")).content.decode()
    assert "mark_as_baseline" in page


def test_the_change_page_leads_to_the_comparison_with_the_baseline(admin_client: Client) -> None:
    make_run(scenarios=scenarios(), baseline=True)
    worse = make_run(WORSE, scenarios=scenarios())
    change = admin_client.get(reverse("admin:evals_evalrun_change", args=[worse.pk]))
    compare_url = reverse("admin:evals_evalrun_compare", args=[worse.pk])
    assert compare_url in change.content.decode()
    page = admin_client.get(compare_url).content.decode()
    assert "FAIL" in page
    assert "high_payment_failures" in page and "regression" in page
    assert reverse("evals:compare", args=[worse.pk]) in page


def test_the_admin_comparison_without_a_baseline_says_so(admin_client: Client) -> None:
    run = make_run(scenarios=scenarios()[:1], trials=1)
    page = admin_client.get(reverse("admin:evals_evalrun_compare", args=[run.pk]))
    assert "There is no baseline run yet." in page.content.decode()
    assert admin_client.get(reverse("admin:evals_evalrun_compare", args=[999])).status_code == 404


def test_a_runs_results_read_as_one_line_each_with_the_json_folded(admin_client: Client) -> None:
    worse = make_run(WORSE, scenarios=scenarios())
    page = admin_client.get(reverse("admin:evals_evalrun_change", args=[worse.pk])).content.decode()
    assert page.count("<summary") >= 6  # every trial's JSON folded away
    assert "decision_quality 1.00 · error_handling 1.00 · tool_usage 1.00" in page


def test_the_run_list_says_the_verdict_and_writes_dates_in_utc(admin_client: Client) -> None:
    import re

    chosen = scenarios()
    base = make_run(scenarios=chosen, baseline=True)
    worse = make_run({chosen[0].id: ["failed"] * 3}, scenarios=chosen)
    page = admin_client.get(reverse("admin:evals_evalrun_changelist")).content.decode()
    assert '<td class="field-verdict">FAIL</td>' in page
    assert '<td class="field-verdict">baseline</td>' in page
    assert re.search(r'class="field-when">\w{3} \d{1,2}, \d\d:\d\d UTC<', page)
    detail = admin_client.get(
        reverse("admin:evals_evalrun_change", args=[worse.pk])
    ).content.decode()
    # The site's one date format, with the zone; not "Nov. 24, 2026, 8:22 p.m.".
    assert re.search(r"\w{3} \d{1,2}, \d{4} \d\d:\d\d UTC", detail)
    assert "p.m." not in detail and "a.m." not in detail
    assert base.pk != worse.pk
