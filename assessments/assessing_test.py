"""Decisions last: asking again for an assessment of a release whose data has not changed
since its verdict keeps that verdict (a person's decision included) and says so; new data
makes a new assessment and the page says the decision was about the earlier data; forcing
assesses anyway and records who asked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from assessments import assessing, filing
from assessments import services as run_services
from releases import data_fingerprint
from releases.models import Conversation, Release, RiskReport, RunStatus
from releases.release_verdict import verdict_of
from review import services as review_services

pytestmark = pytest.mark.django_db


def assessed(release: Release, who: User | None = None) -> RiskReport:
    """A finished run started on the release's data now, and the report it filed."""
    run = run_services.start_assessment(release, who)
    Conversation.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    run.refresh_from_db()
    return filing.file_risk_report(
        release=release, severity="high", findings=["Checkout errors tripled"], conversation=run
    )


@pytest.fixture
def manager() -> User:
    return User.objects.create_user("rm", password="pw-123456789", is_superuser=True)


def test_a_decided_verdict_on_unchanged_data_is_kept_and_says_so(
    make_release: Callable[..., Release], manager: User
) -> None:
    release = make_release(version="v2.2.0")
    report = assessed(release)
    review_services.decide_report(
        report, manager, decision="override", severity="medium", reason="known"
    )
    runs_before = Conversation.objects.count()

    outcome = assessing.assess_unless_unchanged(release, None, asked_by="token CI")

    assert outcome.kept and outcome.run == report.conversation
    assert "has not changed" in outcome.message
    assert "decided by rm (overridden to medium)" in outcome.message
    assert Conversation.objects.count() == runs_before
    verdict = verdict_of(release)
    assert (verdict.state, verdict.severity) == ("decided", "medium")


def test_new_data_makes_a_new_assessment_and_the_page_says_the_decision_was_earlier(
    make_release: Callable[..., Release], manager: User, client: Client
) -> None:
    release = make_release(version="v2.3.0")
    report = assessed(release)
    review_services.decide_report(report, manager, decision="accept")
    client.force_login(manager)
    page = client.get(release.get_absolute_url()).content.decode()
    assert "earlier data" not in page

    # A new test report came in (its figures on the release change).
    Release.objects.filter(pk=release.pk).update(
        test_results={"passed": 9, "failed": 1, "skipped": 1}
    )
    release.refresh_from_db()
    page = client.get(release.get_absolute_url()).content.decode()
    assert "New data since this report." in page
    assert "The decision by rm (accepted) was about the earlier data" in page

    outcome = assessing.assess_unless_unchanged(release, None, asked_by="token CI")
    assert not outcome.kept and outcome.run != report.conversation
    assert outcome.run.status == RunStatus.QUEUED
    assert outcome.run.metadata["asked_by"] == "token CI"
    assert "forced" not in outcome.run.metadata


def test_forcing_assesses_unchanged_data_and_records_who_asked(
    make_release: Callable[..., Release],
) -> None:
    release = make_release(version="v2.4.0")
    report = assessed(release)
    outcome = assessing.assess_unless_unchanged(
        release, None, force=True, asked_by="manage.py assess --force"
    )
    assert not outcome.kept and outcome.run != report.conversation
    assert outcome.run.metadata["forced"] is True
    assert outcome.run.metadata["asked_by"] == "manage.py assess --force"


def test_the_page_button_records_the_user(
    make_release: Callable[..., Release], manager: User
) -> None:
    release = make_release(version="v2.5.0")
    run = run_services.start_assessment(release, manager)
    assert run.metadata["asked_by"] == "user rm"
    assert run.metadata[data_fingerprint.METADATA_KEY] == data_fingerprint.fingerprint(release)


def test_a_failed_run_after_the_verdict_is_not_a_standing_verdict(
    make_release: Callable[..., Release],
) -> None:
    release = make_release(version="v2.6.0")
    assessed(release)
    failed = run_services.start_assessment(release, None)
    Conversation.objects.filter(pk=failed.pk).update(status=RunStatus.FAILED)
    outcome = assessing.assess_unless_unchanged(release, None)
    assert not outcome.kept and outcome.run.status == RunStatus.QUEUED


def test_a_report_without_a_recorded_fingerprint_is_not_kept(
    make_release: Callable[..., Release],
) -> None:
    # Runs from before the fingerprint was recorded: nothing says the data is the same.
    release = make_release(version="v2.7.0")
    report = assessed(release)
    Conversation.objects.filter(pk=report.conversation_id).update(metadata={})
    outcome = assessing.assess_unless_unchanged(release, None)
    assert not outcome.kept


def test_the_fingerprint_follows_every_source(make_release: Callable[..., Release]) -> None:
    release = make_release(version="v2.8.0")
    first = data_fingerprint.fingerprint(release)
    assert data_fingerprint.fingerprint(release) == first
    for field, value in [
        ("changes", ["Another change"]),
        ("deployment_metrics", {"error_rate": 0.2, "response_time_p95": 300}),
        ("title", "A new title"),
    ]:
        before = data_fingerprint.fingerprint(release)
        setattr(release, field, value)
        after = data_fingerprint.fingerprint(release)
        # The title is not data an assessment judges.
        assert (after == before) == (field == "title"), field


def test_an_ingestion_changes_the_fingerprint(make_release: Callable[..., Release]) -> None:
    release = make_release(version="v2.9.0")
    before = data_fingerprint.fingerprint(release)
    ingestions: Any = release.ingestions  # type: ignore[attr-defined]
    ingestions.create(kind="junit", content_hash="abc", origin="api", counts={})
    assert data_fingerprint.fingerprint(release) != before
    ingestions.create(kind="release", content_hash="def", origin="api", counts={})
    assert data_fingerprint.fingerprint(release) != before
