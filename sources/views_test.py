"""The release managers' form: not staff, no raw JSON, uploads through the same services."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from releases.models import Release
from sources.models import Ingestion, TestCase

pytestmark = pytest.mark.django_db

ASSETS = Path(__file__).resolve().parents[1] / "tests" / "assets" / "junit"


@pytest.fixture
def manager() -> Client:
    user = User.objects.create_user("rm", password="x")  # not staff
    user.groups.add(Group.objects.get(name="Release managers"))
    client = Client()
    client.force_login(user)
    return client


def test_release_managers_have_the_permission_and_others_do_not() -> None:
    plain = User.objects.create_user("someone", password="x")
    client = Client()
    client.force_login(plain)
    assert client.get("/sources/releases/new").status_code == 403
    assert Client().get("/sources/releases/new").status_code == 302  # to the login page


def test_a_release_manager_adds_a_release_with_figures_and_a_junit_report(
    manager: Client,
) -> None:
    page = manager.get("/sources/releases/new")
    assert page.status_code == 200 and b"JUnit XML reports" in page.content
    report = SimpleUploadedFile(
        "jest.xml", (ASSETS / "jest-junit.xml").read_bytes(), content_type="application/xml"
    )
    response = manager.post(
        "/sources/releases/new",
        {
            "version": "v4.0.0",
            "title": "Checkout rewrite",
            "changes": "Rewrote checkout\n\nAdded refunds\n",
            "error_rate": "2.5",
            "response_time_p95": "450",
            "metrics_window": "release",
            "junit": [report],
        },
    )
    assert response.status_code == 302 and response["Location"] == "/releases/v4.0.0/"
    release = Release.objects.get(version="v4.0.0")
    assert release.changes == ["Rewrote checkout", "Added refunds"]
    assert release.deployment_metrics == {"error_rate": 0.025, "response_time_p95": 450.0}
    assert release.test_results is not None and release.test_results["failed"] == 1
    assert TestCase.objects.filter(release=release).count() == 5
    ingestion = Ingestion.objects.get(kind="junit")
    assert ingestion.origin == "form" and ingestion.user is not None
    assert ingestion.file_names == ["jest.xml"]


def test_a_correction_keeps_the_identity_and_a_bad_report_stores_nothing(
    manager: Client,
) -> None:
    release = Release.objects.create(version="v5", test_results={"passed": 1})
    page = manager.get(f"/sources/releases/{release.pk}/edit")
    assert page.status_code == 200 and b'value="v5"' in page.content
    bad = SimpleUploadedFile("bad.xml", b"<testsuite>\n<testcase>\n", "application/xml")
    response = manager.post(
        f"/sources/releases/{release.pk}/edit",
        {"version": "other", "passed": "7", "metrics_window": "release", "junit": [bad]},
    )
    assert response.status_code == 200
    assert b"bad.xml, line 3" in response.content
    release.refresh_from_db()
    assert release.test_results == {"passed": 1}
    assert not TestCase.objects.exists()
    response = manager.post(
        f"/sources/releases/{release.pk}/edit",
        {"version": "other", "passed": "7", "failed": "1", "metrics_window": "release"},
    )
    assert response.status_code == 302
    release.refresh_from_db()
    assert release.version == "v5"
    assert release.test_results == {"passed": 7, "failed": 1}


def test_a_figure_the_policy_cannot_take_is_refused_by_the_form(manager: Client) -> None:
    response = manager.post(
        "/sources/releases/new",
        {"version": "v6", "error_rate": "250", "metrics_window": "release"},
    )
    assert response.status_code == 200
    assert not Release.objects.filter(version="v6").exists()


def test_a_token_made_in_the_admin_is_shown_once_and_stored_hashed() -> None:
    from sources.models import IngestionToken

    admin = User.objects.create_superuser("boss", password="x")
    client = Client()
    client.force_login(admin)
    response = client.post(
        "/admin/sources/ingestiontoken/add/", {"name": "checkout CI", "service": ""}
    )
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    page = response.content.decode()
    secret = page.split('<code id="ingestion-token"', 1)[1].split(">", 1)[1].split("<", 1)[0]
    assert secret.startswith("dtk_")
    token = IngestionToken.objects.get()
    assert secret not in (token.token_hash, token.prefix)
    assert token.created_by == admin
    # Shown once: the token's own page does not show it again.
    assert (
        secret
        not in client.get(f"/admin/sources/ingestiontoken/{token.pk}/change/").content.decode()
    )
    api = Client().post(
        "/api/releases",
        data='{"version": "v1"}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert api.status_code == 201
