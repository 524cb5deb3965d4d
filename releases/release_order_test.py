"""Which releases came before a release: the same service's, by deploy order, creation order
for a release never deployed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from releases.models import Release, Service
from releases.release_order import earlier_releases, previous_release

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def at(days: int) -> datetime:
    return T0 + timedelta(days=days)


def versions(releases: Any) -> list[str]:
    return [r.version for r in releases]


def test_by_deploy_time_else_creation_time_within_the_service(
    make_release: Callable[..., Release],
) -> None:
    other = Service.objects.create(name="Search", slug="search")
    a = make_release("v1.0.0", created_at=at(0))  # never deployed: placed by creation
    b = make_release("v1.1.0", created_at=at(5))
    Release.objects.filter(pk=b.pk).update(deployed_at=at(2))
    c = make_release("v1.2.0", created_at=at(3))  # created after b, deployed never
    s = make_release("v9.0.0", created_at=at(2))
    Release.objects.filter(pk=s.pk).update(service=other, deployed_at=at(2))
    d = make_release("v2.0.0", created_at=at(10))
    Release.objects.filter(pk=d.pk).update(deployed_at=at(4))
    d.refresh_from_db()
    assert versions(earlier_releases(d)) == ["v1.2.0", "v1.1.0", "v1.0.0"]
    b.refresh_from_db()
    assert previous_release(b) == a
    assert previous_release(c) == b
    assert previous_release(a) is None


def test_releases_at_the_same_time_are_ordered_by_their_id(
    make_release: Callable[..., Release],
) -> None:
    first = make_release("v1.0.0", created_at=at(1))
    second = make_release("v1.0.1", created_at=at(1))
    assert previous_release(second) == first
    assert previous_release(first) is None
