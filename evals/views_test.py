from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evals.models import EvalRun
from tests.eval_data import make_run, suite

pytestmark = pytest.mark.django_db

WORSE = {"high_payment_failures": ["failed", "failed", "failed"]}


@pytest.fixture
def viewer(client: Client) -> Client:
    """A Release manager: may see eval runs, may not change the baseline."""
    user = User.objects.create_user("manager", password="pw-12345678")
    user.groups.add(Group.objects.get(name="Release managers"))
    client.force_login(user)
    return client


def queries(client: Client, url: str, **params: Any) -> int:
    with CaptureQueriesContext(connection) as context:
        assert client.get(url, params).status_code == 200
    return len(context.captured_queries)


def scenarios() -> list[Any]:
    return [suite().get(i) for i in ("high_payment_failures", "low_clean_docs", "summary_http_500")]


def test_the_evals_page_says_when_there_are_no_runs(admin_client: Client) -> None:
    page = admin_client.get(reverse("evals:list")).content.decode()
    assert "No eval runs yet." in page
    assert "The chart appears once a run has finished." in page


def test_the_evals_page_charts_runs_and_marks_the_baseline(admin_client: Client) -> None:
    base = make_run(scenarios=scenarios(), baseline=True)
    make_run(WORSE, scenarios=scenarios())
    page = admin_client.get(reverse("evals:list")).content.decode()
    assert "<svg" in page and "ev-series-pass_rate" in page
    assert "ev-baseline-mark" in page
    assert f"Run #{base.pk}: pass rate 100%" in page
    assert "67%" in page  # the worse run: 6 of 9
    assert reverse("evals:compare", args=[base.pk + 1]) + "?against=baseline" in page


def test_a_running_run_shows_a_live_progress_bar(admin_client: Client) -> None:
    run = make_run(scenarios=scenarios(), finish=False)
    page = admin_client.get(reverse("evals:list")).content.decode()
    assert f'ws-connect="/ws/evals/runs/{run.pk}/"' in page
    assert f'id="evalrun-progress-{run.pk}"' in page
    assert "hx-ws-2" in page
    # The runs table refreshes itself (its htmx partial) while a run is in progress.
    table = admin_client.get(
        reverse("evals:list"), headers={"HX-Request": "true", "HX-Target": "eval-runs"}
    )
    assert table.content.decode().lstrip().startswith('<section id="eval-runs"')
    assert 'hx-trigger="every 5s"' in table.content.decode()
    # A page whose watched run ended asks for the whole page (its chart, the run's row).
    whole = admin_client.get(
        reverse("evals:list"), headers={"HX-Request": "true", "HX-Target": "main"}
    )
    assert '<main class="page" id="main">' in whole.content.decode()
    run_page = admin_client.get(reverse("evals:run", args=[run.pk])).content.decode()
    assert f'ws-connect="/ws/evals/runs/{run.pk}/"' in run_page


def test_the_list_takes_the_same_queries_for_few_and_many_runs(
    admin_client: Client, django_assert_num_queries: Any
) -> None:
    make_run(scenarios=scenarios()[:1], trials=1, baseline=True)
    few = queries(admin_client, reverse("evals:list"))
    for _ in range(4):
        make_run(scenarios=scenarios(), trials=2)
    make_run(scenarios=scenarios(), finish=False)
    with django_assert_num_queries(few):
        admin_client.get(reverse("evals:list"))


def test_the_run_page_lists_scenarios_and_links_each_trial(admin_client: Client) -> None:
    run = make_run(WORSE, scenarios=scenarios(), conversations=True)
    response = admin_client.get(reverse("evals:run", args=[run.pk]))
    page = response.content.decode()
    assert "high_payment_failures" in page and "critical" in page
    # Failing scenarios first.
    assert page.index("high_payment_failures") < page.index("low_clean_docs")
    for result in run.results.all():
        assert reverse("releases:run", args=[result.conversation_id]) in page
    assert "#trace-heading" in page
    assert "pass^3" in page
    assert "decision_quality: severity acceptable (low)" in page


def test_the_run_page_takes_the_same_queries_for_few_and_many_results(
    admin_client: Client, django_assert_num_queries: Any
) -> None:
    small = make_run(scenarios=scenarios()[:1], trials=1, conversations=True)
    big = make_run(WORSE, scenarios=suite().scenarios[:10], trials=3, conversations=True)
    few = queries(admin_client, reverse("evals:run", args=[small.pk]))
    with django_assert_num_queries(few):
        admin_client.get(reverse("evals:run", args=[big.pk]))


def test_compare_puts_the_verdict_on_top_and_regressions_first(admin_client: Client) -> None:
    make_run(scenarios=scenarios(), baseline=True, conversations=True)
    worse = make_run(WORSE, scenarios=scenarios(), conversations=True)
    page = admin_client.get(
        reverse("evals:compare", args=[worse.pk]), {"against": "baseline"}
    ).content.decode()
    assert "ev-verdict-fail" in page
    assert page.index("FAIL") < page.index("Scenarios")
    table = page[page.index('class="table table-compact ev-compare"') :]
    assert table.index("high_payment_failures") < table.index("low_clean_docs")
    assert "ev-change-tag-regression" in table
    assert "\u2212100 pts" in table
    # Drill-down: both runs' transcripts.
    for result in worse.results.filter(scenario_id="high_payment_failures"):
        assert reverse("releases:run", args=[result.conversation_id]) in page


def test_an_equally_good_run_compares_as_pass(admin_client: Client) -> None:
    make_run(scenarios=scenarios(), baseline=True)
    same = make_run(scenarios=scenarios())
    page = admin_client.get(reverse("evals:compare", args=[same.pk])).content.decode()
    assert "ev-verdict-pass" in page


def test_compare_takes_the_same_queries_for_few_and_many_results(
    admin_client: Client, django_assert_num_queries: Any
) -> None:
    a = make_run(scenarios=scenarios()[:1], trials=1, baseline=True)
    b = make_run(scenarios=scenarios()[:1], trials=1)
    few = queries(admin_client, reverse("evals:compare", args=[b.pk]))
    c = make_run(WORSE, scenarios=suite().scenarios[:12], trials=3)
    d = make_run(scenarios=suite().scenarios[:12], trials=3)
    with django_assert_num_queries(few):
        admin_client.get(reverse("evals:compare", args=[c.pk]), {"against": d.pk})
    assert a.pk


def test_compare_without_a_baseline_says_so(admin_client: Client) -> None:
    run = make_run(scenarios=scenarios()[:1], trials=1)
    page = admin_client.get(reverse("evals:compare", args=[run.pk])).content.decode()
    assert "There is no baseline run yet." in page
    assert (
        admin_client.get(reverse("evals:compare", args=[run.pk]), {"against": "x"}).status_code
        == 404
    )


def test_marking_the_baseline_needs_the_permission_and_keeps_one(
    admin_client: Client, viewer: Client
) -> None:
    first = make_run(scenarios=scenarios()[:1], trials=1, baseline=True)
    second = make_run(scenarios=scenarios()[:1], trials=1)
    url = reverse("evals:mark_baseline", args=[second.pk])
    assert viewer.post(url).status_code == 403
    response = admin_client.post(url, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "Baseline" in response.content.decode()
    assert list(EvalRun.objects.filter(is_baseline=True)) == [second]
    first.refresh_from_db()
    assert not first.is_baseline
    assert admin_client.post(url).status_code == 302
    # A user given the permission may do it too.
    user = User.objects.get(username="manager")
    user.user_permissions.add(Permission.objects.get(codename="mark_baseline"))
    assert viewer.post(reverse("evals:mark_baseline", args=[first.pk])).status_code == 302
    assert EvalRun.objects.get(is_baseline=True) == first


def test_a_running_run_cannot_be_the_baseline(admin_client: Client) -> None:
    run = make_run(scenarios=scenarios()[:1], trials=1, finish=False)
    response = admin_client.post(
        reverse("evals:mark_baseline", args=[run.pk]), headers={"HX-Request": "true"}
    )
    assert response.status_code == 400
    assert "Only a finished" in response.content.decode()
    assert not EvalRun.objects.filter(is_baseline=True).exists()


def test_marking_the_baseline_checks_csrf(admin_user: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    run = make_run(scenarios=scenarios()[:1], trials=1)
    assert client.post(reverse("evals:mark_baseline", args=[run.pk])).status_code == 403
    page = client.get(reverse("evals:run", args=[run.pk])).content.decode()
    assert "Mark as baseline" in page and "csrfmiddlewaretoken" in page


def test_the_pages_need_a_login_and_the_permission(client: Client, viewer: Client) -> None:
    run = make_run(scenarios=scenarios()[:1], trials=1)
    assert viewer.get(reverse("evals:run", args=[run.pk])).status_code == 200
    page = viewer.get(reverse("evals:run", args=[run.pk])).content.decode()
    # Not allowed: the button is there, disabled, saying which permission it needs.
    assert 'disabled aria-describedby="baseline-why">Mark as baseline</button>' in page
    assert "<code>evals.mark_baseline</code>" in page
    assert reverse("evals:mark_baseline", args=[run.pk]) not in page
    outsider = Client()
    outsider.force_login(User.objects.create_user("someone", password="pw-12345678"))
    for url in (
        reverse("evals:list"),
        reverse("evals:run", args=[run.pk]),
        reverse("evals:compare", args=[run.pk]),
    ):
        assert outsider.get(url).status_code == 403
        assert Client().get(url).status_code == 302  # to the login page


def test_text_from_runs_is_escaped(admin_client: Client) -> None:
    run = make_run(scenarios=scenarios()[:1], trials=1, notes="<script>alert(1)</script>")
    page = admin_client.get(reverse("evals:run", args=[run.pk])).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_trials_run_page_names_the_scenario_and_leads_back_to_the_eval_run(
    admin_client: Client,
) -> None:
    run = make_run(scenarios=scenarios()[:1], trials=1, conversations=True)
    result = run.results.get()
    page = admin_client.get(reverse("releases:run", args=[result.conversation_id])).content
    text = page.decode()
    assert "Eval trial: <code>high_payment_failures</code> #1" in text
    assert reverse("evals:run", args=[run.pk]) in text


def test_a_regressed_run_says_fail_in_the_list_and_on_its_page(admin_client: Client) -> None:
    base = make_run(scenarios=scenarios(), baseline=True)
    worse = make_run(WORSE, scenarios=scenarios())
    same = make_run(scenarios=scenarios())
    page = admin_client.get(reverse("evals:list")).content.decode()
    compare = reverse("evals:compare", args=[worse.pk]) + "?against=baseline"
    assert f'class="ev-verdict-badge ev-verdict-badge-fail" href="{compare}"' in page
    assert "ev-verdict-badge-pass" in page  # the equally good run
    assert page.count("ev-verdict-badge ") == 2  # not the baseline itself
    run_page = admin_client.get(reverse("evals:run", args=[worse.pk])).content.decode()
    assert 'id="ev-verdict"' in run_page and ">FAIL</span>" in run_page
    assert f"Verdict against the baseline, run #{base.pk}" in run_page
    # The verdict in words, apart from the run's own status (which succeeded).
    assert (
        "Fails: 1 critical scenario regressed: high_payment_failures passed 3 of 3 before, "
        "0 of 3 now"
    ) in run_page
    assert 'Run status: <span class="status status-succeeded">Succeeded</span>' in run_page
    # Making a regressed run the baseline asks first, and is not the primary action.
    assert "hx-confirm=" in run_page and 'class="button button-primary">Mark' not in run_page
    same_page = admin_client.get(reverse("evals:run", args=[same.pk])).content.decode()
    assert ">PASS</span>" in same_page and "hx-confirm=" not in same_page


def test_the_compare_page_offers_the_runs_to_compare_with(admin_client: Client) -> None:
    base = make_run(scenarios=scenarios(), baseline=True)
    other = make_run(scenarios=scenarios())
    worse = make_run(WORSE, scenarios=scenarios())
    make_run(scenarios=scenarios(), finish=False)  # still running: nothing to compare yet
    page = admin_client.get(
        reverse("evals:compare", args=[worse.pk]), {"against": "baseline"}
    ).content.decode()
    picker = page[page.index('<select id="against"') : page.index("</select>")]
    assert f'<option value="{base.pk}" selected>#{base.pk} (baseline)' in picker
    assert f'<option value="{other.pk}">#{other.pk} · gpt-test' in picker
    assert picker.count("<option") == 2  # not the run itself, not the unfinished one


def test_an_errored_critical_scenario_is_a_regression_in_words_and_one_trial_has_no_interval(
    admin_client: Client,
) -> None:
    chosen = [suite().get("summary_http_500"), suite().get("low_clean_docs")]
    make_run(scenarios=chosen, trials=1, baseline=True)
    errored = make_run({"summary_http_500": ["errored"]}, scenarios=chosen, trials=1)
    compare = admin_client.get(
        reverse("evals:compare", args=[errored.pk]) + "?against=baseline"
    ).content.decode()
    assert (
        "Fails: 1 critical scenario regressed: summary_http_500 passed 1 of 1 before, errored now"
    ) in compare
    assert 'ev-change-tag-errored">errored now</span>' in compare
    assert compare.count(">unchanged<") == 1  # low_clean_docs only
    run_page = admin_client.get(reverse("evals:run", args=[errored.pk])).content.decode()
    assert "1 trial: no interval" in run_page
    assert "21%" not in run_page  # Wilson's interval for 1 of 1 (21%-100%) is not shown
