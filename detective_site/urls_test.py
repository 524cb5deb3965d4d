"""Every page requires login: walk every URL pattern and request it anonymously."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.urls.resolvers import RegexPattern, RoutePattern

SAMPLE_BY_CONVERTER = {
    "int": "1",
    "str": "x",
    "slug": "x",
    "path": "x/y",
    "uuid": str(uuid.uuid4()),
}
# Pages anyone may see: the login pages themselves, and the ingestion API's OpenAPI document
# and its page (they hold no data; tools read them without a browser session).
PUBLIC = {"login", "admin:login", "ingest:openapi-json", "ingest:openapi-view"}
# The release API wants a bearer token (the verdict also a session with the permission to
# view releases): no login page, a 401 (405 for a GET of what only takes POST).
API = {"api:release_summary", "api:risk_reports", "api:release_verdict"}
# The ingestion API (sources/api.py) wants an ingestion token; every call is a POST.
API |= {
    f"ingest:{name}"
    for name in ("put_release", "post_commits", "post_junit", "post_metrics", "assess_release")
}
# The drill-downs (sources/drilldown/) want a run's token or the API key, as the summary does.
API |= {f"drilldown:{name}" for name in ("tests", "changes", "metric_history", "suspects")}
# A pipeline's calls: one ingestion in one request, and a job that waits for a person.
API |= {"ingest_bundle", "api:pipeline_waiting"}
# OTLP in (traces/): an ingestion token, POST only.
API |= {"otlp:traces", "otlp:logs", "traces_api:release_traces"}


def sample_path(pattern: RoutePattern | RegexPattern) -> str:
    """A concrete path that the pattern matches."""
    text = str(pattern)
    if isinstance(pattern, RoutePattern):
        return re.sub(
            r"<(?:(\w+):)?\w+>", lambda m: SAMPLE_BY_CONVERTER.get(m.group(1) or "str", "x"), text
        )
    text = text.lstrip("^").rstrip("$").replace("\\Z", "").replace("\\", "")
    # A named group becomes its first alternative, or a word for a catch-all.
    text = re.sub(
        r"\(\?P<\w+>([^)]*)\)",
        lambda m: m.group(1).split("|")[0] if "|" in m.group(1) else "x",
        text,
    )
    return text


def url_patterns(
    patterns: Sequence[URLPattern | URLResolver], prefix: str = "", namespace: str = ""
) -> Iterator[tuple[str, str]]:
    """(name, path) for every endpoint."""
    for entry in patterns:
        path = prefix + sample_path(entry.pattern)
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from url_patterns(entry.url_patterns, path, inner)
        else:
            yield f"{namespace}{entry.name or entry.lookup_str}", "/" + path


ALL_URLS = sorted(set(url_patterns(get_resolver().url_patterns)))


def test_the_walk_finds_the_pages() -> None:
    names = {name for name, _ in ALL_URLS}
    assert {"home", "releases:list", "evals:list", "login", "logout", "admin:index"} <= names
    assert len(ALL_URLS) > 30  # the admin's pages for every model


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "path"), ALL_URLS, ids=[name for name, _ in ALL_URLS])
def test_anonymous_users_are_sent_to_log_in(client: Client, name: str, path: str) -> None:
    response = client.get(path)
    if name in PUBLIC:
        assert response.status_code == 200
        return
    if name in API:
        assert response.status_code in {401, 405}
        return
    if name == "favicon":  # the icon, not a login page
        assert response.status_code == 301 and response["Location"].endswith("/favicon.svg")
        return
    assert response.status_code == 302, f"{path} answered {response.status_code}"
    assert urlsplit(response["Location"]).path in {reverse("login"), reverse("admin:login")}


@pytest.mark.django_db
def test_after_login_the_user_returns_to_the_page_asked_for(
    client: Client, django_user_model: type
) -> None:
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user(username="rm", password="a-long-password")
    user.groups.add(Group.objects.get(name="Release managers"))
    response = client.get("/releases/?q=v2")
    assert response["Location"] == "/accounts/login/?next=/releases/%3Fq%3Dv2"
    response = client.post(
        "/accounts/login/",
        {"username": "rm", "password": "a-long-password", "next": "/releases/?q=v2"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/releases/?q=v2"
    assert client.get("/releases/").status_code == 200


@pytest.mark.django_db
def test_logout_is_a_post(admin_client: Client) -> None:
    assert admin_client.get(reverse("logout")).status_code == 405
    response = admin_client.post(reverse("logout"))
    assert response.status_code == 302
    assert admin_client.get(reverse("releases:list")).status_code == 302


@pytest.mark.django_db
def test_the_404_page_is_the_sites_and_lists_no_urls(client: Client, admin_client: Client) -> None:
    for who in (client, admin_client):
        response = who.get("/no/such/page/")
        page = response.content.decode()
        assert response.status_code == 404
        assert "Page not found" in page and 'class="topbar"' in page
        assert "URLconf" not in page and "&lt;str:version&gt;" not in page


@pytest.mark.django_db
def test_the_500_page_is_the_sites(admin_client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    from releases import selectors

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a secret detail")

    monkeypatch.setattr(selectors, "dashboard", boom)
    admin_client.raise_request_exception = False
    response = admin_client.get("/")
    page = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in page and 'class="topbar"' in page
    assert "a secret detail" not in page and "Traceback" not in page
