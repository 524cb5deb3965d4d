"""Writes: records from the parsers into rows, one transaction per ingestion.

Every way in (the API, `manage.py ingest`, the release managers' forms, the demo seed) calls
these functions, so none can store what another would refuse. Each ingestion is recorded with
its origin and keyed by the hash of its content: the same report sent twice is stored once
(the second call answers with the first ingestion, `created=False`). A rerun is a new report,
so its test cases are new attempts of the same tests. A failure anywhere rolls the whole
ingestion back: nothing of a refused report is half-stored.
"""

from __future__ import annotations

from sources.services.base import (
    BATCH,
    MAX_COMMITS,
    MAX_SAMPLES,
    TOKEN_PREFIX,
    Ingested,
    IngestError,
    Origin,
    ReleaseFields,
    check_token,
    create_token,
    find_service,
    release_for,
    revoke_token,
    service_for,
    upsert_release,
)
from sources.services.by_hand import HandSummary, save_by_hand
from sources.services.commits import ingest_commits
from sources.services.junit import ingest_junit
from sources.services.metrics import (
    ingest_metrics,
    ingest_metrics_file,
    ingest_prometheus,
    previous_release,
)

__all__ = [
    "BATCH",
    "MAX_COMMITS",
    "MAX_SAMPLES",
    "TOKEN_PREFIX",
    "HandSummary",
    "IngestError",
    "Ingested",
    "Origin",
    "ReleaseFields",
    "check_token",
    "create_token",
    "find_service",
    "ingest_commits",
    "ingest_junit",
    "ingest_metrics",
    "ingest_metrics_file",
    "ingest_prometheus",
    "previous_release",
    "release_for",
    "revoke_token",
    "save_by_hand",
    "service_for",
    "upsert_release",
]
