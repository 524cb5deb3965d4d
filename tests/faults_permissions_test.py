"""Faults (issue 22, item 7): permissions are permissions.

A staff user with no permissions could start and cancel assessments, read run pages and
their websockets and the evaluations: the staff flag was taken for a permission. Now it opens
the admin and nothing else. Every page and action outside the admin (the site's URL patterns,
enumerated) answers such a user 403, and so do the run and eval-run websockets (4403).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from assessments import filing
from detective_site.asgi import application
from evals.models import EvalRun
from releases.models import Conversation, Release, RunStatus
from review import services as review_services

pytestmark = pytest.mark.django_db(transaction=True)
# Outside the site's permission rules: the admin (its own), the API and OTLP in (bearer
# tokens), login.
OUTSIDE = ("admin/", "api/", "otlp/", "accounts/", "favicon.ico")


def _patterns(resolvers: list[Any], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for entry in resolvers:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _patterns(entry.url_patterns, route)
        else:
            yield route, entry


@pytest.fixture
def staff(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user(
        "staff-only", password="pw-staff-12345", is_staff=True
    )


def _objects(make_release: Callable[..., Release], owner: User) -> dict[str, Any]:
    release = make_release("v-perm")
    run = Conversation.objects.create(release=release, status=RunStatus.RUNNING)
    report = filing.file_risk_report(
        release=release, severity="high", findings=["a finding"], summary="s", conversation=run
    )
    decision = review_services.decide_report(report, owner, decision="accept")
    eval_run = EvalRun.objects.create(suite_version="1")
    return {
        "version": release.version,
        "service": release.service.slug,
        "release": release.pk,
        "run": run.pk,
        "report": report.pk,
        "decision": decision.pk,
        "eval_run": eval_run.pk,
    }


def _url(route: str, objects: dict[str, Any]) -> str:
    """The route with its parameters filled in with real objects."""
    if "<version:version>" in route:
        route = route.replace("<version:version>", objects["version"])
    route = route.replace("<slug:service>", objects["service"])
    if "sources/releases/<int:pk>" in route:
        route = route.replace("<int:pk>", str(objects["release"]))
    if "<uuid:pk>" in route:
        route = route.replace("<uuid:pk>", str(objects["run"]))
    if "review/reports/<int:pk>" in route:
        route = route.replace("<int:pk>", str(objects["report"]))
    if "review/decisions/<int:pk>" in route:
        route = route.replace("<int:pk>", str(objects["decision"]))
    route = route.replace("<int:pk>", str(objects["eval_run"]))
    assert "<" not in route, route
    return "/" + route


def test_a_staff_user_without_permissions_gets_403_on_every_page_and_action(
    staff: User, make_release: Callable[..., Release], admin_user: User
) -> None:
    objects = _objects(make_release, admin_user)
    client = Client()
    client.force_login(staff)
    answers: dict[str, int] = {}
    for route, _pattern in _patterns(get_resolver().url_patterns):
        if route.startswith(OUTSIDE):
            continue
        url = _url(route, objects)
        status = client.get(url).status_code
        if status == 405:  # an action: it takes POST
            status = client.post(url).status_code
        answers[url] = status
    assert len(answers) >= 12, answers
    assert {url: status for url, status in answers.items() if status != 403} == {}
    # Nothing happened: the run is still running (not cancelled), no new run was started.
    run = Conversation.objects.get(pk=objects["run"])
    assert run.status == RunStatus.RUNNING and run.cancel_requested_at is None
    assert Conversation.objects.count() == 1
    # The admin is what the staff flag is for: it opens (with no models to see).
    assert client.get("/admin/").status_code == 200
    print(f"\nstaff without permissions: {len(answers)} pages and actions, all 403")


@pytest.mark.asyncio
async def test_a_staff_user_without_permissions_is_refused_on_the_websockets(
    staff: User, make_release: Callable[..., Release], admin_user: User
) -> None:
    from asgiref.sync import sync_to_async

    objects = await sync_to_async(_objects)(make_release, admin_user)
    client = Client()
    await sync_to_async(client.force_login)(staff)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    for path in (f"/ws/runs/{objects['run']}/", f"/ws/evals/runs/{objects['eval_run']}/"):
        communicator = WebsocketCommunicator(
            application, path, headers=[(b"cookie", cookie), (b"origin", b"http://localhost")]
        )
        connected, _ = await communicator.connect()
        assert connected, path
        closed = await communicator.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": 4403}, path
        await communicator.disconnect()
