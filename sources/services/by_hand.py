"""A release added or corrected in the release managers' form."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from django.core.exceptions import ValidationError
from django.db import transaction

from releases.models import Release
from releases.stored_verdict import refreshed_once
from sources.models import (
    MetricWindow,
)
from sources.parsers.openmetrics import MetricsFormatError, parse_metrics
from sources.services.base import (
    IngestError,
    Origin,
    ReleaseFields,
    _problems,
    upsert_release,
)
from sources.services.junit import ingest_junit
from sources.services.metrics import ingest_metrics

# ---- by hand (the release managers' form) ------------------------------------------------------


@dataclass(frozen=True)
class HandSummary:
    """The summary as a person types it; None leaves a part as it is (or as its sources give
    it). Validated by the release's own JSON schemas, like every other way in."""

    changes: list[str] | None = None
    test_results: dict[str, Any] | None = None
    deployment_metrics: dict[str, Any] | None = None


@refreshed_once
def save_by_hand(
    fields: ReleaseFields,
    typed: HandSummary,
    origin: Origin,
    *,
    junit_files: Sequence[tuple[str, IO[bytes]]] = (),
    metrics_file: tuple[str, bytes] | None = None,
    metrics_window: str = MetricWindow.RELEASE,
) -> Release:
    """A release added or corrected in a form, with its uploads, in one transaction."""
    with transaction.atomic():
        release, _ = upsert_release(fields, origin)
        changed = []
        for name in ("changes", "test_results", "deployment_metrics"):
            value = getattr(typed, name)
            if value is not None:
                setattr(release, name, value)
                changed.append(name)
        if changed:
            try:
                release.full_clean()
            except ValidationError as exc:
                raise IngestError(f"Invalid release: {_problems(exc)}", 422) from None
            release.save(update_fields=[*changed, "updated_at"])
        for name, stream in junit_files:
            ingest_junit(release, stream, name, origin)
        if metrics_file is not None:
            name, data = metrics_file
            try:
                samples = parse_metrics(data, source=name)
            except MetricsFormatError as exc:
                raise IngestError(f"Refused: {exc}.") from None
            ingest_metrics(release, samples, origin, window=metrics_window, file_names=[name])
        release.refresh_from_db()
    return release
