"""Issue 37, item 7: the values that made ingestion answer 500, against the two ways in that are
not the API (whose tests, and the fuzz, are tests/hostile_ingestion_test.py, where the values
come from): the release managers' form (/sources/releases/new: typed fields and a metrics
upload) and `manage.py ingest`. Each is a clear error (the form again with the reason, or a
CommandError, never a traceback or a 500) and nothing is stored, not even the release. Run on
SQLite, and on PostgreSQL with DATABASE_URL.

What cannot reach these two is left out, and why: the form picks a service from a list and
takes no commits; `ingest` reads commits from git, whose records cannot hold a NUL, a line count
past 2**31, a hunk start of 10**30 or a non-boolean flag (the commit values are the API's)."""

from __future__ import annotations

import re
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client

from releases.models import Release, Service
from tests.hostile_ingestion_test import DEPLOYED, METRICS_VALUES, RELEASE_VALUES, YEAR_ONE, stored

pytestmark = pytest.mark.django_db

FORM = "/sources/releases/new"
# A field's reason, or the form's.
ERROR = re.compile(r'class="(?:src-error|alert alert-error)" role="alert">(.*?)</')

# The release values a person can type into the form's fields (its service is a choice).
FORM_RELEASE_VALUES = {
    name: {key: value for key, value in body.items() if key != "service"}
    for name, body in RELEASE_VALUES.items()
    if set(body) - {"version", "service"}
}
# The form's own figures: the same bounds as the API's, typed.
FORM_FIGURE_VALUES = {
    "p95 above an hour": {"response_time_p95": "3600001"},
    "p95 of 1e308": {"response_time_p95": "1e308"},
    "p95 of inf": {"response_time_p95": "inf"},
    "error rate 1e308": {"error_rate": "1e308"},
    "passed 2**31": {"passed": str(2**31)},
    "failed 10**30": {"failed": str(10**30)},
    "NUL in a failing test": {"failed": "1", "failing_tests": "test_a\u0000b"},
    "NUL in a change": {"changes": "fix\u0000"},
    "deploy time past 9999": {"deployed_at": "10000-01-01T00:00"},
}


@pytest.fixture
def manager() -> Client:
    user = User.objects.create_user("rm", password="x")
    user.groups.add(Group.objects.get(name="Release managers"))
    client = Client()
    client.force_login(user)
    return client


def refused_by_the_form(answer: Any, before: tuple[int, ...]) -> None:
    assert answer.status_code == 200, (answer.status_code, answer.get("Location"))
    reason = ERROR.search(answer.content.decode())
    assert reason and reason.group(1).strip(), "no reason on the page"
    assert stored() == before


def naive_is_utc(answer: Any) -> bool:
    """The form's deploy time is a datetime-local box that says UTC: a time without an offset
    is that time in UTC, stored, never a 500."""
    release = Release.objects.filter(version="v1").first()
    return (
        answer.status_code == 302
        and release is not None
        and release.deployed_at is not None
        and release.deployed_at.isoformat() == "2026-11-20T10:00:00+00:00"
    )


@pytest.mark.parametrize("fields", FORM_RELEASE_VALUES.values(), ids=FORM_RELEASE_VALUES.keys())
def test_each_release_value_typed_into_the_form_is_refused(
    manager: Client, fields: dict[str, str]
) -> None:
    before = stored()
    answer = manager.post(FORM, {"metrics_window": "release", **fields})
    if fields.get("deployed_at") == "2026-11-20T10:00:00":
        assert naive_is_utc(answer)
        return
    refused_by_the_form(answer, before)


@pytest.mark.parametrize("fields", FORM_FIGURE_VALUES.values(), ids=FORM_FIGURE_VALUES.keys())
def test_each_figure_typed_into_the_form_is_refused(
    manager: Client, fields: dict[str, str]
) -> None:
    before = stored()
    answer = manager.post(FORM, {"version": "v1", "metrics_window": "release", **fields})
    refused_by_the_form(answer, before)


def test_a_lone_surrogate_cannot_reach_the_form_as_one(manager: Client) -> None:
    """A browser sends UTF-8; the bytes of a lone surrogate are not, and are read as U+FFFD,
    which a title may hold."""
    answer = manager.post(
        FORM,
        b"version=v1&metrics_window=release&title=a%ED%A0%80b",
        content_type="application/x-www-form-urlencoded",
    )
    assert answer.status_code == 302
    assert Release.objects.get(version="v1").title == "a\ufffd\ufffd\ufffdb"


@pytest.mark.parametrize("text", METRICS_VALUES.values(), ids=METRICS_VALUES.keys())
def test_each_metrics_value_uploaded_with_the_form_is_refused(manager: Client, text: str) -> None:
    before = stored()
    upload = SimpleUploadedFile("metrics.txt", text.encode())
    answer = manager.post(
        FORM,
        {"version": "v1", "deployed_at": "2026-11-20T10:00", "metrics_window": "release",
         "metrics_file": upload},
    )  # fmt: skip
    refused_by_the_form(answer, before)


# ---- manage.py ingest ---------------------------------------------------------------------------


def ingest(*args: str) -> str:
    out = StringIO()
    call_command("ingest", *args, stdout=out, stderr=out)
    return out.getvalue()


def refused_by_ingest(run: Callable[[], Any], before: tuple[int, ...]) -> None:
    with pytest.raises(CommandError) as refused:
        run()
    assert str(refused.value).strip()
    assert stored() == before


def release_args(body: dict[str, str]) -> list[str]:
    args = [body["version"], "--service", body["service"]]
    if "deployed_at" in body:
        args += ["--deployed-at", body["deployed_at"]]
    if "environment" in body:
        args += ["--environment", body["environment"]]
    return args


# The release values `ingest` has an option for (it has no title).
INGEST_RELEASE_VALUES = {
    name: body for name, body in RELEASE_VALUES.items() if "title" not in body
} | {
    "a deploy time past 9999": {"version": "v1", "service": "shop", "deployed_at": "10000-01-01"},
    "year 1 with +14:00": {"version": "v1", "service": "shop", "deployed_at": YEAR_ONE},
}


@pytest.mark.parametrize("body", INGEST_RELEASE_VALUES.values(), ids=INGEST_RELEASE_VALUES.keys())
def test_each_release_value_given_to_ingest_is_a_command_error(body: dict[str, str]) -> None:
    before = stored()
    refused_by_ingest(lambda: ingest(*release_args(body)), before)


@pytest.mark.parametrize("text", METRICS_VALUES.values(), ids=METRICS_VALUES.keys())
def test_each_metrics_value_given_to_ingest_is_a_command_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(text)
    before = stored()
    refused_by_ingest(
        lambda: ingest("v1", "--service", "shop", "--deployed-at", DEPLOYED,
                       "--metrics-file", str(path)),
        before,
    )  # fmt: skip


def test_ingest_keeps_a_slash_and_its_absence_apart() -> None:
    ingest("v1", "--service", "a/b")
    ingest("v1", "--service", "ab")
    assert sorted(Service.objects.exclude(slug="default").values_list("slug", flat=True)) == [
        "a-b",
        "ab",
    ]
    before = stored()
    refused_by_ingest(lambda: ingest("v2", "--service", "a b"), before)
