"""What a release's data is, as one hash: the content of every source it was sent (the
ingestions' content hashes: commits, JUnit reports, metrics) and the figures an assessment
reads (the changes, test results and deployment metrics, which may also be typed in by hand).

An assessment records the hash of the data it was started on (`Conversation.metadata`). When
the hash is the same now, nothing new has come in since: asking again returns the verdict
that stands, a person's decision included, instead of a new assessment that would throw the
decision away (a CI job re-run because something else in it flaked). New data changes the
hash, and the release page says that the standing decision was about the earlier data.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser

from releases.models import Conversation, Release, RiskReport

METADATA_KEY = "data_fingerprint"
# The release's own fields (title, refs) are not data an assessment judges.
_SOURCE_KINDS = ("commits", "junit", "metrics")


def fingerprint(release: Release) -> str:
    """The hash of the release's data now (one query, besides the release's own row)."""
    sources = sorted(
        release.ingestions.filter(kind__in=_SOURCE_KINDS)  # type: ignore[attr-defined]
        .exclude(content_hash__startswith="reading:")
        .values_list("kind", "content_hash")
    )
    figures = {
        "changes": release.changes,
        "test_results": release.test_results,
        "deployment_metrics": release.deployment_metrics,
    }
    payload = json.dumps(
        {"sources": [list(item) for item in sources], "figures": figures},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def of_run(run: Conversation | None) -> str | None:
    """The hash recorded on a run when it was started; None for runs from before it was."""
    if run is None:
        return None
    value = (run.metadata or {}).get(METADATA_KEY)
    return value if isinstance(value, str) else None


def report_is_current(report: RiskReport, release: Release, now: str | None = None) -> bool:
    """Whether the report judged the data the release has now. A report whose run recorded
    no hash (filed before this was, seeded, by hand) counts as current: nothing says not."""
    recorded = of_run(report.conversation)
    if recorded is None:
        return True
    return recorded == (now if now is not None else fingerprint(release))


def run_metadata(
    release: Release,
    user: AbstractBaseUser | None,
    traceparent: str,
    asked_by: str,
    forced: bool,
) -> dict[str, Any]:
    """A new run's metadata: the data's hash, the trace it continues, who asked for it and
    whether it was forced (asked for on data that had not changed)."""
    metadata: dict[str, Any] = {METADATA_KEY: fingerprint(release)}
    if traceparent:
        metadata["traceparent"] = traceparent
    if not asked_by and user is not None and user.is_authenticated:
        asked_by = f"user {user.get_username()}"
    if asked_by:
        metadata["asked_by"] = asked_by
    if forced:
        metadata["forced"] = True
    return metadata
