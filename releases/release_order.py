"""Which releases came before a release: the same service's, by deploy order.

A release that was never deployed takes its place by its creation time, so a service whose
releases are typed in by hand keeps the order they were entered in.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.db.models.functions import Coalesce

from releases.models import Release


def in_release_order(releases: QuerySet[Release]) -> QuerySet[Release]:
    """`releases` with `order_at` (deploy time, else creation time), most recent first."""
    return releases.annotate(order_at=Coalesce("deployed_at", "created_at")).order_by(
        "-order_at", "-id"
    )


def earlier_releases(release: Release) -> QuerySet[Release]:
    """The service's releases before this one, most recent first (the one before it first)."""
    at = release.deployed_at or release.created_at
    return (
        in_release_order(Release.objects.filter(service_id=release.service_id))
        .exclude(pk=release.pk)
        .filter(Q(order_at__lt=at) | Q(order_at=at, id__lt=release.pk))
    )


def previous_release(release: Release) -> Release | None:
    return earlier_releases(release).first()


__all__ = ["earlier_releases", "in_release_order", "previous_release"]
