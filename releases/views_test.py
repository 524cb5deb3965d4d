from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from assessments import filing
from releases.models import Conversation, Release, RunStatus, Service
from review import services as review_services

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


@pytest.fixture
def releases(make_release: Callable[..., Release]) -> dict[str, Release]:
    now = timezone.now()
    risky = make_release(
        "v2.1.0",
        title="Payment processing",
        changes=["Added payment processing", "Fixed authentication bug"],
        created_at=now - timedelta(days=3),
    )
    filing.file_risk_report(release=risky, severity="low", findings=["old"])
    filing.file_risk_report(release=risky, severity="high", findings=["2 failing tests"])
    Conversation.objects.create(release=risky, status=RunStatus.FAILED, error="Provider down")
    unknown = make_release(
        "v2.2.0",
        title="Nothing known <b>yet</b>",
        changes=None,
        test_results=None,
        deployment_metrics={"error_rate": None, "response_time_p95": 0},
        created_at=now - timedelta(days=2),
    )
    calm = make_release("v2.3.0", title="Copy fixes", created_at=now - timedelta(days=1))
    filing.file_risk_report(release=calm, severity="low", findings=["text only"])
    Conversation.objects.create(release=calm, status=RunStatus.RUNNING)
    return {"risky": risky, "unknown": unknown, "calm": calm}


def viewer_with_view_permissions() -> User:
    """May read releases and reports, may not run assessments."""
    viewer = User.objects.create_user("viewer", password="a-long-password")
    viewer.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="releases", codename__in=["view_release", "view_riskreport"]
        )
    )
    return viewer


def rows(page: str) -> list[str]:
    """The versions in the release table, in order."""
    return re.findall(r'<a class="version" href="/releases/([^/]+)/">', page)


# --- access -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["/", "/releases/", "/releases/v2.1.0/", "/releases/?q=v2&severity=high"]
)
def test_pages_require_login(client: Client, releases: dict[str, Release], url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_an_unknown_release_is_404(admin_client: Client) -> None:
    assert admin_client.get("/releases/v9.9.9/").status_code == 404


# --- the list --------------------------------------------------------------------------------


def test_the_list_shows_each_release_with_its_latest_state(
    admin_client: Client, releases: dict[str, Release]
) -> None:
    response = admin_client.get(reverse("releases:list"))
    page = response.content.decode()
    assert response.status_code == 200
    assert rows(page) == ["v2.3.0", "v2.2.0", "v2.1.0"]  # newest first
    assert page.count('class="badge badge-high"') == 1
    assert page.count('class="badge badge-low"') == 1  # v2.1.0's older low is not the latest
    assert "Not assessed" in page
    assert re.search(r"(ago|just now)</time>", page)  # when it was last assessed
    assert '<a class="status status-failed"' in page
    assert '<a class="status status-running"' in page
    assert "never run" in page
    assert "Nothing known &lt;b&gt;yet&lt;/b&gt;" in page  # release data is escaped
    assert '<span class="missing">missing</span>' in page  # missing is not zero...
    assert "0 ms" in page  # ...and zero is not missing
    assert 'aria-current="page">Releases' in page
    assert "admin</span>" in page  # the signed-in user
    assert "Vary" in response and "HX-Request" in response["Vary"]


def test_an_htmx_request_gets_only_the_table(
    admin_client: Client, releases: dict[str, Release]
) -> None:
    query = {"q": "payment", "severity": "", "run": ""}
    response = admin_client.get(reverse("releases:list"), query, HTTP_HX_REQUEST="true")
    page = response.content.decode()
    assert page.lstrip().startswith('<div id="release-table"')
    assert "<html" not in page and "<form" not in page
    assert rows(page) == ["v2.1.0"]
    # The address bar gets the filters that are set, not the empty ones.
    assert response["HX-Push-Url"] == "/releases/?q=payment"
    response = admin_client.get(reverse("releases:list"), {"q": ""}, HTTP_HX_REQUEST="true")
    assert response["HX-Push-Url"] == "/releases/"


def test_the_full_page_keeps_the_filters_it_was_asked_for(
    admin_client: Client, releases: dict[str, Release]
) -> None:
    page = admin_client.get("/releases/?q=fixes&severity=low&run=running").content.decode()
    assert 'name="q" value="fixes"' in page
    assert '<option value="low" selected>' in page
    assert '<option value="running" selected>' in page
    assert 'hx-push-url="true"' in page
    assert rows(page) == ["v2.3.0"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"q": "v2.2"}, ["v2.2.0"]),  # version
        ({"q": "COPY"}, ["v2.3.0"]),  # title, any case
        ({"q": "authentication"}, ["v2.1.0"]),  # a change
        ({"severity": "high"}, ["v2.1.0"]),
        ({"severity": "low"}, ["v2.3.0"]),
        ({"severity": "none"}, ["v2.2.0"]),
        # Never assessed by a model: the policy's verdict counts, as the gate's does (issue 39).
        ({"severity": "medium"}, ["v2.2.0"]),
        ({"severity": "bogus"}, ["v2.3.0", "v2.2.0", "v2.1.0"]),  # unknown: ignored
        ({"run": "failed"}, ["v2.1.0"]),
        ({"run": "running"}, ["v2.3.0"]),
        ({"run": "none"}, ["v2.2.0"]),
        ({"q": "v2", "severity": "low", "run": "failed"}, []),
    ],
)
def test_search_and_filters(
    admin_client: Client, releases: dict[str, Release], query: dict[str, str], expected: list[str]
) -> None:
    page = admin_client.get(reverse("releases:list"), query).content.decode()
    assert rows(page) == expected
    if not expected:
        assert "No release matches" in page


def test_pagination(admin_client: Client, make_release: Callable[..., Release]) -> None:
    now = timezone.now()
    for index in range(25):
        make_release(f"v1.{index}.0", created_at=now - timedelta(hours=index))
    first = admin_client.get(reverse("releases:list")).content.decode()
    assert rows(first) == [f"v1.{index}.0" for index in range(20)]
    assert "1\N{EN DASH}20 of 25 releases" in first
    assert 'href="?page=2"' in first and 'rel="next"' in first

    second = admin_client.get(
        reverse("releases:list"), {"page": "2"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert rows(second) == [f"v1.{index}.0" for index in range(20, 25)]
    assert "21\N{EN DASH}25 of 25" in second
    assert 'href="?page=1"' in second and 'rel="next"' not in second

    # Filters are kept across pages; a page out of range shows the last one.
    filtered = admin_client.get(reverse("releases:list"), {"q": "v1.2", "page": "99"})
    assert rows(filtered.content.decode()) == ["v1.2.0"] + [f"v1.2{i}.0" for i in range(5)]
    page = admin_client.get(reverse("releases:list"), {"q": "v1", "page": "1"}).content.decode()
    assert 'href="?q=v1&amp;page=2"' in page


def test_the_list_query_count_does_not_grow_with_releases(
    admin_client: Client, make_release: Callable[..., Release], django_assert_num_queries: Any
) -> None:
    def add(count: int) -> None:
        for _ in range(count):
            release = make_release()
            filing.file_risk_report(release=release, severity="medium", findings=["x"])
            Conversation.objects.create(release=release, status=RunStatus.SUCCEEDED)

    add(3)
    with django_assert_num_queries(4):  # session, user, count, rows
        assert admin_client.get(reverse("releases:list")).status_code == 200
    add(37)
    with django_assert_num_queries(4):
        assert admin_client.get(reverse("releases:list")).status_code == 200


# --- the detail page ----------------------------------------------------------------------


def test_the_detail_shows_release_data_and_the_latest_report(
    admin_client: Client, make_release: Callable[..., Release]
) -> None:
    release = make_release(
        "v3.0.0",
        title="Subscriptions",
        changes=["Added subscriptions", "Dunning emails"],
        test_results={"passed": 1402, "failed": 2, "skipped": 5, "failing_tests": ["a::b", "c"]},
        deployment_metrics={"error_rate": 0.021, "response_time_p95": 450, "cpu_utilization": 0.71},
    )
    run = Conversation.objects.create(
        release=release,
        status=RunStatus.SUCCEEDED,
        provider="anthropic",
        model="claude-x",
        input_tokens=2000,
        output_tokens=310,
        estimated_cost="0.013110",
        started_at=timezone.now() - timedelta(seconds=9.4),
        finished_at=timezone.now(),
    )
    filing.file_risk_report(
        release=release,
        severity="medium",
        findings=["p95 drifted up", "two failing tests"],
        summary="Contained change.",
        conversation=run,
    )
    page = admin_client.get(reverse("releases:detail", args=["v3.0.0"])).content.decode()
    for text in [
        "Subscriptions",
        "<li>Added subscriptions</li>",
        "1,402",
        "<code>a::b</code>",
        "2.1 %",
        "450 ms",
        "Cpu utilization",
        "0.71",
        "Contained change.",
        "<li>p95 drifted up</li>",
        'class="badge badge-medium badge-large"',
        f'href="/runs/{run.pk}/"',
        f"run {str(run.pk)[:8]}",
        "anthropic · claude-x",
        "2,310",
        "$0.0131",
        "9.4 s",
        'class="severity-chart"',
        'class="dot dot-medium"',
    ]:
        assert text in page, text
    assert "missing" not in page


def test_missing_release_data_is_shown_as_missing_not_zero(
    admin_client: Client, make_release: Callable[..., Release]
) -> None:
    make_release("v0.0.1", changes=None, test_results=None, deployment_metrics=None, title="Bare")
    make_release(
        "v0.0.2",
        changes=[],
        test_results={"passed": 0, "failed": 3},
        deployment_metrics={"error_rate": 0.0, "response_time_p95": None},
    )
    bare = admin_client.get(reverse("releases:detail", args=["v0.0.1"])).content.decode()
    assert bare.count('<p class="missing-block"><span class="missing">missing</span>') == 3
    # What is missing, said once on top, with where to send it.
    assert (
        'Missing: <span class="missing-item">the list of changes</span>'
        '<span class="missing-item">the test results</span>'
        '<span class="missing-item">the deployment metrics</span>'
    ) in bare
    assert "docs/using/your-releases.md" in bare
    # Not assessed by a model: the policy's verdict is shown as such (issue 37).
    assert "(no model assessment)" in bare and "has not been assessed yet" in bare
    assert "No reports yet" in bare and "No runs yet" in bare

    partial = admin_client.get(reverse("releases:detail", args=["v0.0.2"])).content.decode()
    # An empty list is not missing, but shown the same way, with its own word.
    assert '<p class="missing-block"><span class="missing">empty</span>' in partial
    assert '<span class="missing-item">' not in partial  # nothing is missing here
    assert "<dt>Passed</dt><dd>0</dd>" in partial  # zero is zero
    assert '<dt>Skipped</dt><dd><span class="missing">missing</span>' in partial
    assert "names of the failing tests missing" in partial
    assert "<dt>Error rate</dt><dd>0.0 %</dd>" in partial
    assert '<dt>p95 latency</dt><dd><span class="missing">missing</span>' in partial


def test_release_data_and_reports_are_escaped(
    admin_client: Client, make_release: Callable[..., Release]
) -> None:
    release = make_release(
        "v-escape",
        title=SCRIPT,
        changes=[SCRIPT],
        test_results={"passed": 1, "failed": 1, "failing_tests": [SCRIPT]},
        deployment_metrics={"error_rate": 0.1},
    )
    # A metric name that is markup is refused now; a row from before the rule still holds one.
    Release.objects.filter(pk=release.pk).update(deployment_metrics={"error_rate": 0.1, SCRIPT: 1})
    run = Conversation.objects.create(
        release=release, status=RunStatus.FAILED, model=SCRIPT, error=SCRIPT
    )
    filing.file_risk_report(
        release=release, severity="high", findings=[SCRIPT], summary=SCRIPT, conversation=run
    )
    pages = [
        admin_client.get(reverse("releases:detail", args=["v-escape"])).content.decode(),
        admin_client.get(reverse("releases:list")).content.decode(),
        admin_client.get(reverse("home")).content.decode(),
    ]
    for page in pages:
        assert "<script>alert" not in page
        assert ESCAPED in page
    detail = pages[0]
    assert detail.count(ESCAPED) >= 5  # title, change, failing test, finding, summary


# --- the Reassess button --------------------------------------------------------------------


def test_reassess_is_an_htmx_post_with_csrf_for_users_allowed_to_run(
    admin_client: Client, releases: dict[str, Release]
) -> None:
    page = admin_client.get(reverse("releases:detail", args=["v2.1.0"])).content.decode()
    assert 'hx-post="/releases/v2.1.0/reassess"' in page
    assert 'name="csrfmiddlewaretoken"' in page
    assert 'hx-headers=\'{"X-CSRFToken"' in page  # every htmx request carries the token
    assert ">Reassess</button>" in page
    never = admin_client.get(reverse("releases:detail", args=["v2.2.0"])).content.decode()
    assert ">Assess</button>" in never  # never assessed, never run


def test_release_managers_may_reassess_others_may_not(
    client: Client, releases: dict[str, Release]
) -> None:
    viewer = viewer_with_view_permissions()
    client.force_login(viewer)
    page = client.get(reverse("releases:detail", args=["v2.1.0"])).content.decode()
    assert "Payment processing" in page
    assert "hx-post" not in page
    # The action is there, disabled, saying which permission it needs.
    assert 'disabled aria-describedby="reassess-why">Reassess</button>' in page
    assert "<code>releases.run_assessment</code>" in page

    manager = User.objects.create_user("manager", password="a-long-password")
    manager.groups.add(Group.objects.get(name="Release managers"))
    client.force_login(manager)
    page = client.get(reverse("releases:detail", args=["v2.1.0"])).content.decode()
    assert ">Reassess</button>" in page


def test_while_a_run_is_active_the_button_links_to_it(
    admin_client: Client, client: Client, releases: dict[str, Release]
) -> None:
    running = releases["calm"].conversations.get()
    page = admin_client.get(reverse("releases:detail", args=["v2.3.0"])).content.decode()
    assert "disabled" in page and "Running…" in page
    assert f'href="/runs/{running.pk}/">Watch the run' in page
    assert 'hx-post="/releases/v2.3.0/reassess"' not in page

    viewer = viewer_with_view_permissions()
    client.force_login(viewer)
    page = client.get(reverse("releases:detail", args=["v2.3.0"])).content.decode()
    assert "Running…" not in page
    assert f'href="/runs/{running.pk}/">Running: watch the run' in page


def test_the_detail_query_count_does_not_grow_with_history(
    admin_client: Client, make_release: Callable[..., Release], django_assert_num_queries: Any
) -> None:
    release = make_release("v1.0.0")

    def add(count: int) -> None:
        for _ in range(count):
            run = Conversation.objects.create(release=release, status=RunStatus.SUCCEEDED)
            filing.file_risk_report(
                release=release, severity="low", findings=["x"], conversation=run
            )

    url = reverse("releases:detail", args=["v1.0.0"])
    add(2)
    # session, user, release, reports, their decisions, runs, the decision history, and the
    # detail's counts (test cases by status; commits and samples)
    with django_assert_num_queries(9):
        assert admin_client.get(url).status_code == 200
    add(30)
    with django_assert_num_queries(9):
        assert admin_client.get(url).status_code == 200


@pytest.mark.parametrize("url", ["/", "/releases/", "/releases/v2.1.0/", "/releases/?q=v2"])
def test_a_user_without_the_view_permission_gets_403_and_no_data(
    client: Client, releases: dict[str, Release], url: str
) -> None:
    client.force_login(User.objects.create_user("nobody", password="a-long-password"))
    response = client.get(url)
    assert response.status_code == 403
    page = response.content.decode()
    assert "Not allowed" in page and "Release managers" in page
    assert "v2.1.0" not in page and "Payment processing" not in page


def test_only_viewing_both_releases_and_reports_opens_the_pages(
    client: Client, releases: dict[str, Release]
) -> None:
    user = User.objects.create_user("half", password="a-long-password")
    user.user_permissions.add(Permission.objects.get(codename="view_release"))
    client.force_login(user)
    assert client.get("/releases/v2.1.0/").status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_riskreport"))
    client.force_login(User.objects.get(pk=user.pk))
    assert client.get("/releases/v2.1.0/").status_code == 200


# --- home ----------------------------------------------------------------------------------


def test_home_shows_recent_runs_high_risk_and_failures(
    admin_client: Client, releases: dict[str, Release]
) -> None:
    page = admin_client.get(reverse("home")).content.decode()
    assert 'aria-current="page">Home' in page
    high_risk = page[page.index('id="high-risk"') : page.index('id="attention"')]
    assert "v2.1.0" in high_risk and "v2.3.0" not in high_risk
    attention = page[page.index('id="attention"') : page.index('id="recent-runs"')]
    assert "Provider down" in attention
    recent = page[page.index('id="recent-runs"') :]
    assert recent.count("<tr>") == 3  # header + two runs
    assert '<span class="stat-value">3</span><span class="stat-label">Releases' in page
    # The trend names every week under its bar, and says what the bars count.
    weeks = page[page.index('class="trend-weeks') : page.index('class="trend-x-name')]
    assert weeks.count("<span") == 12
    monday = timezone.now().date() - timedelta(days=timezone.now().weekday())
    assert f'title="This week">{monday:%b} {monday.day}</span>' in weeks
    assert "Week starting (Monday, UTC); bars: reports filed that week" in page


def test_login_lands_on_home(client: Client) -> None:
    User.objects.create_user("rm", password="a-long-password")
    response = client.post(reverse("login"), {"username": "rm", "password": "a-long-password"})
    assert response["Location"] == reverse("home")


def test_home_query_count_is_constant(
    admin_client: Client, make_release: Callable[..., Release], django_assert_num_queries: Any
) -> None:
    def add(count: int) -> None:
        for _ in range(count):
            release = make_release()
            filing.file_risk_report(release=release, severity="high", findings=["x"])
            Conversation.objects.create(release=release, status=RunStatus.FAILED, error="boom")

    add(2)
    # session, user, nine reads (the review count; the severity trend's two: the undecided
    # and the decided reports apart, issue 39)
    with django_assert_num_queries(11):
        assert admin_client.get(reverse("home")).status_code == 200
    add(20)
    with django_assert_num_queries(11):
        assert admin_client.get(reverse("home")).status_code == 200


# --- sorting ---------------------------------------------------------------------------------


def test_the_release_list_sorts_by_risk_error_rate_p95_and_assessment(
    admin_client: Client, make_release: Callable[..., Release]
) -> None:
    now = timezone.now()
    slow = make_release("slow", deployment_metrics={"error_rate": 0.01, "response_time_p95": 900})
    risky = make_release("risky", deployment_metrics={"error_rate": 0.07, "response_time_p95": 300})
    make_release("unknown", deployment_metrics=None)
    filing.file_risk_report(
        release=slow, severity="low", findings=["x"], filed_at=now - timedelta(hours=1)
    )
    report = filing.file_risk_report(release=risky, severity="low", findings=["x"], filed_at=now)
    # A person's override counts: risky is high, whatever the model filed.
    review_services.decide_report(
        report, None, decision="override", severity="high", reason="Errors."
    )

    def order(sort: str) -> list[str]:
        return rows(admin_client.get(reverse("releases:list"), {"sort": sort}).content.decode())

    # Never assessed by a model, "unknown" counts at the policy's verdict on its data (its
    # metrics missing: medium), as the gate does (issue 39).
    assert order("-risk") == ["risky", "unknown", "slow"]
    assert order("risk") == ["slow", "unknown", "risky"]
    # Releases without the figure come last, whichever the direction.
    assert order("-error_rate") == ["risky", "slow", "unknown"]
    assert order("-p95") == ["slow", "risky", "unknown"]
    assert order("-assessed") == ["risky", "slow", "unknown"]
    assert order("bogus") == order("") == ["unknown", "risky", "slow"]  # newest first
    page = admin_client.get(reverse("releases:list"), {"sort": "-risk", "q": "s"}).content.decode()
    assert 'aria-sort="descending"' in page
    # The next click on the same column sorts the other way, keeping the search.
    assert 'href="?sort=risk&amp;q=s" hx-get="?sort=risk&amp;q=s"' in page


def test_every_sort_has_its_entry_in_the_phones_select() -> None:
    from releases.selectors import SORTS
    from releases.views import SORT_CHOICES

    assert {value for value, _ in SORT_CHOICES} == SORTS


def test_a_release_of_another_service_shows_its_service_beside_the_version(
    admin_client: Client, make_release: Callable[..., Release]
) -> None:
    make_release("v1.0.0")
    other = make_release("v1.0.1")
    other.service = Service.objects.create(name="Shop <API>", slug="shop")
    other.version = "v1.0.0"
    other.save()
    Conversation.objects.create(release=other, status=RunStatus.FAILED, error="down")
    tag = '<span class="service-tag" title="Service">Shop &lt;API&gt;</span>'
    listing = admin_client.get("/releases/").content.decode()
    assert listing.count(tag) == 1 and listing.count("service-tag") == 1
    assert tag in admin_client.get("/").content.decode()
    assert tag in admin_client.get(other.get_absolute_url()).content.decode()


def test_a_report_that_only_repeats_the_policy_says_the_model_agreed_with_it(
    admin_client: Client, make_release: Callable[..., Release]
) -> None:
    """Issue 40: the policy's sentences, copied, are not shown twice as the model's."""
    from sources import judging

    release = make_release(
        "v4.0.0",
        test_results={"passed": 90, "failed": 0, "skipped": 0},
        deployment_metrics={"error_rate": 0.09, "response_time_p95": 300},
    )
    judged = judging.judge_release(release)
    evidence = judged.verdict.evidence()
    checked = filing.file_checked_report(
        release=release, severity=judged.verdict.severity, findings=evidence
    )
    assert checked.report is not None and checked.report.agreed_with_policy
    page = admin_client.get(reverse("releases:detail", args=["v4.0.0"])).content.decode()
    assert "The model agreed with the policy:" in page
    assert "The policy's sentences it filed" in page

    own = "The error rate rose with the retry change, which doubles failed calls."
    checked = filing.file_checked_report(
        release=release, severity=judged.verdict.severity, findings=[*evidence, own]
    )
    assert checked.report is not None and not checked.report.agreed_with_policy
    page = admin_client.get(reverse("releases:detail", args=["v4.0.0"])).content.decode()
    assert "The model agreed with the policy:" not in page
    # The model's own sentence is kept and marked as the model's, beside its grounding; the
    # policy's sentences it copied are not.
    assert checked.report.model_own_words == [own]
    marked = '<span class="rv-flag rv-flag-own"'
    assert page.count(marked) == 1
    assert page.index(marked) > page.index("The error rate rose with the retry change")
