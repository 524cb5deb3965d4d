"""The releases of the same service that came before one: by deploy order when both were
deployed, else by when they were created (a release typed in by hand has no deploy time).

"Previous" never means the release created just before in the database whatever its service:
measured, a p95 taken from an unrelated service's release made a clean release medium.
"""

from __future__ import annotations

from django.db.models import Q

from releases.models import Release

HISTORY_RELEASES = 10


def earlier_releases(release: Release, count: int = HISTORY_RELEASES) -> list[Release]:
    """The `count` releases of `release`'s service just before it, newest first."""
    same_service = Release.objects.filter(service_id=release.service_id).exclude(pk=release.pk)
    if release.deployed_at is not None:
        before = same_service.filter(
            Q(deployed_at__lt=release.deployed_at)
            | Q(deployed_at__isnull=True, created_at__lt=release.created_at)
        )
    else:
        before = same_service.filter(created_at__lt=release.created_at)
    ordered = before.order_by("-deployed_at", "-created_at", "-id")
    return list(ordered[:count])
