"""Faults (issue 22, item 1): no stored value can break a page.

The 39 hostile values of the campaign (`tests/hostile_values.py`) go through every writer of
release data: the admin's form, the `create_release` service (seed_demo and ingestion use it)
and a plain `Release.objects.create`. Each is refused with a message and nothing is stored.
Then the same values are written straight into the table, as a row from before the rules (or
written by hand) would hold them, and every page that shows the release, the API summary and
the risk policy still answer: the value shows and counts as missing.

Runs on the test database (SQLite or PostgreSQL); a value the database itself refuses to store
(PostgreSQL's jsonb takes no NaN, NUL or lone surrogate) cannot be an old row there, and is
counted as such.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.urls import reverse

from releases import services
from releases.models import Release
from sources import judging
from tests.hostile_values import DEEP, HOSTILE

pytestmark = pytest.mark.django_db
API_KEY = "stored-data-test-key"
GOOD = {
    "changes": ["Changed the checkout"],
    "test_results": {"passed": 10, "failed": 0, "skipped": 1},
    "deployment_metrics": {"error_rate": 0.01, "response_time_p95": 300},
}


def _form_data(page: str, field: str, text: str, release: Release) -> dict[str, str]:
    """What the admin's change form posts, with `field`'s box holding `text`."""
    data = {
        "version": release.version,
        "title": release.title,
        "created_at_0": release.created_at.strftime("%Y-%m-%d"),
        "created_at_1": release.created_at.strftime("%H:%M:%S"),
        **{name: json.dumps(value) for name, value in GOOD.items()},
    }
    for name, value in re.findall(
        r'name="([\w-]+-(?:TOTAL|INITIAL|MIN_NUM|MAX_NUM)_FORMS)"'
        r'[^>]*value="(\d*)"',
        page,
    ):
        data[name] = value
    data[field] = text
    return data


def _python_value(text: str) -> Any:
    """The value a script would hand the model: parsed as Python parses it, with the deep
    nesting built in a loop (the parser cannot) and integers of any length."""
    deep: Any = []
    for _ in range(2999):
        deep = [deep]
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        value = json.loads(text.replace(DEEP, '"__deep__"'))
    finally:
        sys.set_int_max_str_digits(limit)

    def put(item: Any) -> Any:
        if item == "__deep__":
            return deep
        if isinstance(item, dict):
            return {key: put(child) for key, child in item.items()}
        return item

    return put(value)


def _pages(client: Client, release: Release) -> dict[str, int]:
    """The status of every page that shows this release's data."""
    urls = {
        "list": reverse("releases:list"),
        "detail": reverse("releases:detail", args=[release.version]),
        "home": reverse("home"),
        "admin list": reverse("admin:releases_release_changelist"),
        "admin page": reverse("admin:releases_release_change", args=[release.pk]),
    }
    statuses = {name: client.get(url).status_code for name, url in urls.items()}
    api = client.get(
        reverse("api:release_summary", args=[release.version]),
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    statuses["api summary"] = api.status_code
    return statuses


@pytest.fixture
def release(make_release: Callable[..., Release]) -> Release:
    return make_release("v-hostile", title="Hostile", **GOOD)


def test_the_39_hostile_values_through_the_admin_are_refused_with_a_message(
    admin_client: Client, release: Release, settings: Any
) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    url = reverse("admin:releases_release_change", args=[release.pk])
    page = admin_client.get(url).content.decode()
    refused = 0
    for field, text in HOSTILE:
        response = admin_client.post(url, _form_data(page, field, text, release))
        # Refused: the form comes back (200) with the field's error, not a redirect or a 500.
        assert response.status_code == 200, (field, text[:60], response.status_code)
        errors = response.context["adminform"].form.errors
        assert field in errors, (field, text[:60])
        refused += 1
        release.refresh_from_db()
        assert {name: getattr(release, name) for name in GOOD} == GOOD
    assert refused == 39
    assert set(_pages(admin_client, release).values()) == {200}
    # The unknown metric's message lists the known ones.
    response = admin_client.post(
        url, _form_data(page, "deployment_metrics", '{"p95_ms": 1}', release)
    )
    message = " ".join(response.context["adminform"].form.errors["deployment_metrics"])
    assert "p95_ms" in message and "response_time_p95" in message
    print(f"\nadmin: {refused} of {len(HOSTILE)} hostile values refused, 0 responses 500")


@pytest.mark.parametrize("writer", ["service", "objects.create", "save"])
def test_every_other_writer_refuses_the_hostile_values(
    writer: str, release: Release, make_release: Callable[..., Release]
) -> None:
    refused = accepted = 0
    for index, (field, text) in enumerate(HOSTILE):
        value = _python_value(text)
        version = f"v-writer-{index}"
        try:
            if writer == "service":
                services.create_release(version=version, **{**GOOD, field: value})
            elif writer == "objects.create":
                Release.objects.create(version=version, **{**GOOD, field: value})
            else:
                setattr(release, field, value)
                release.save()
        except ValidationError as error:
            assert field in error.message_dict, (field, text[:60])
            refused += 1
        else:
            # Only the key given twice is a value at all once Python has parsed it (the
            # last one wins), and a valid one.
            assert '"error_rate": 0.1, "error_rate": 0.2' in text, (writer, field, text[:60])
            accepted += 1
        release.refresh_from_db()
    assert (refused, accepted) == (38, 1)
    assert (
        not Release.objects.filter(version__startswith="v-writer-")
        .exclude(version="v-writer-18")
        .exists()
    )


def _store_raw(release: Release, field: str, text: str) -> bool:
    """Write the text straight into the column, as an old row holds it; False when the
    database itself refuses it."""
    table = connection.ops.quote_name(Release._meta.db_table)
    column = connection.ops.quote_name(field)
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET {column} = %s{cast} WHERE id = %s", [text, release.pk]
            )
    except DatabaseError:
        return False
    return True


def test_an_old_row_holding_any_hostile_value_breaks_no_page_and_counts_as_missing(
    admin_client: Client, release: Release, settings: Any
) -> None:
    settings.DETECTIVE_API_KEY = API_KEY
    stored = refused_by_database = 0
    broken: list[tuple[str, str, dict[str, int]]] = []
    for field, text in HOSTILE:
        Release.objects.filter(pk=release.pk).update(**GOOD)
        if not _store_raw(release, field, text):
            refused_by_database += 1
            continue
        stored += 1
        statuses = _pages(admin_client, release)
        if set(statuses.values()) != {200}:
            broken.append((field, text[:60], statuses))
        fresh = Release.objects.get(pk=release.pk)
        # The policy reads it without raising, and the agent's summary encodes.
        json.dumps(judging.judge_release(fresh).for_agent(), allow_nan=False)
    assert broken == []
    assert stored + refused_by_database == 39
    assert stored >= (20 if connection.vendor == "postgresql" else 30)
    print(
        f"\nold rows ({connection.vendor}): {stored} hostile values stored, "
        f"{refused_by_database} refused by the database, 0 pages broken"
    )


def test_an_unreadable_figure_shows_as_missing_and_the_policy_says_missing(
    admin_client: Client, release: Release
) -> None:
    assert _store_raw(
        release, "deployment_metrics", '{"error_rate": 0.5, "response_time_p95": ' + "9" * 400 + "}"
    )
    fresh = Release.objects.get(pk=release.pk)
    assert fresh.deployment_metrics == {"error_rate": 0.5, "response_time_p95": None}
    page = admin_client.get(reverse("releases:detail", args=[release.version])).content.decode()
    assert re.search(r"p95 latency</dt><dd><span class=\"missing\">missing", page)
    signals = judging.judge_release(fresh).verdict.signals
    assert "missing_deployment_metrics_response_time_p95" in [signal.name for signal in signals]


def test_the_migration_lists_the_rows_that_break_the_rules(
    release: Release, make_release: Callable[..., Release], capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib
    from types import SimpleNamespace

    from django.apps import apps

    migration = importlib.import_module("releases.migrations.0008_release_data_rules")
    make_release("v-fine")
    assert _store_raw(release, "deployment_metrics", '{"p95_ms": 450}')
    migration.report_bad_rows(apps, SimpleNamespace(connection=connection))
    out = capsys.readouterr().out
    assert "1 release(s) hold data that breaks the rules" in out
    assert f"id {release.pk} ('v-hostile')" in out and "p95_ms" in out
    assert "v-fine" not in out
    # Listed, not changed.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT deployment_metrics FROM {Release._meta.db_table} WHERE id = %s", [release.pk]
        )
        assert json.loads(cursor.fetchone()[0]) == {"p95_ms": 450}
