"""Faults (issue 22, item 3): a model that floods is bounded.

10 MB of streamed text in 200-byte chunks was stored chunk by chunk: 50,005 events, the
database 69 MB larger, a run page of 30 MB. Now the deltas are coalesced into events by time
and size, the run stops at its text cap saying so, and the page shows a bounded transcript.
The model is the scripted HTTP server (`tests/llm_server.py`, mode "flood"), the run goes
through `manage.py assess` (the worker's own pipeline) on the test database.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from releases.models import AgentEvent, Conversation, Release, RunStatus
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)
MB = 1024 * 1024


def database_bytes() -> int:
    """The database's size on disk: the SQLite file and its write-ahead log, or PostgreSQL's
    own count of the database."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            return int(cursor.fetchone()[0])
    path = Path(connection.settings_dict["NAME"])
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(os.path.getsize(file) for file in (path, Path(f"{path}-wal")) if file.exists())


def test_a_10_mb_flood_ends_within_its_caps_and_keeps_the_database_and_page_small(
    make_release: Callable[..., Release], admin_client: Client
) -> None:
    release = make_release("v-flood")
    before = database_bytes()
    started = time.monotonic()
    with ScriptedLLM(mode="flood") as llm:
        _assess(release, llm)
    took = time.monotonic() - started
    run = Conversation.objects.get(release=release)
    assert run.status == RunStatus.FAILED
    assert "DETECTIVE_MAX_RUN_TEXT_CHARS" in run.error and "Stopped" in run.error
    events = AgentEvent.objects.filter(conversation=run)
    deltas = events.filter(kind="text_delta")
    text = sum(len(event.payload["text"]) for event in deltas)
    assert text <= 200_000 + 200
    assert events.count() < 300  # coalesced: 1,000 chunks of text made far fewer events
    grew = database_bytes() - before
    assert grew < MB, grew
    page = admin_client.get(reverse("releases:run", args=[run.pk]))
    assert page.status_code == 200
    assert len(page.content) < MB
    assert "DETECTIVE_MAX_RUN_TEXT_CHARS" in page.content.decode()
    assert "Show more" in page.content.decode()
    print(
        f"\nflood: run stopped in {took:.1f} s, {events.count()} events "
        f"({deltas.count()} text), {text:,} characters kept, database +{grew / 1024:.0f} KB, "
        f"run page {len(page.content) / 1024:.0f} KB"
    )


def _assess(release: Release, llm: ScriptedLLM) -> None:
    from django.core.management.base import CommandError

    try:
        call_command(
            "assess",
            release.version,
            "--provider=openai-compatible",
            "--model=scripted",
            f"--base-url={llm.base_url}",
            stdout=io.StringIO(),
        )
    except CommandError as error:  # no report was filed: the run was stopped
        assert "No report was filed" in str(error)
