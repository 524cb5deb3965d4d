"""The releases before one: of its service only, by deploy order, else by creation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from releases.models import Release
from sources import services
from sources.drilldown.earlier import earlier_releases
from sources.services import Origin, ReleaseFields

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 11, 1, tzinfo=UTC)


def release(version: str, service: str, day: int | None) -> Release:
    deployed = DAY + timedelta(days=day) if day is not None else None
    made, _ = services.upsert_release(
        ReleaseFields(version=version, service=service, deployed_at=deployed), Origin("seed")
    )
    return made


def test_by_deploy_order_within_the_service() -> None:
    # Created in another order than deployed; another service's release in between.
    late = release("v3", "checkout", 3)
    first = release("v1", "checkout", 1)
    release("v2-other", "search", 2)
    second = release("v2", "checkout", 2)
    assert [r.version for r in earlier_releases(late)] == ["v2", "v1"]
    assert [r.version for r in earlier_releases(second)] == ["v1"]
    assert earlier_releases(first) == []
    assert [r.version for r in earlier_releases(late, count=1)] == ["v2"]


def test_without_a_deploy_time_by_creation() -> None:
    older = release("v1", "checkout", None)
    newer = release("v2", "checkout", None)
    assert earlier_releases(newer) == [older]
    assert earlier_releases(older) == []
