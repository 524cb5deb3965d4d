"""A failed test's suspect commits, for `GET /api/releases/<version>/suspects?test=`: the
frames its failure text was read into, the ranking (risk/suspects.py) and each suspect's changed
lines at the head, as ingestion stored them (sources/services/suspects.py).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from releases.models import Release
from risk.history import TestHistory
from risk.suspect_signals import suspect_sentence
from risk.suspects import NO_SUSPECT, Suspect
from sources.drilldown.paging import QueryError
from sources.models import TestCase, TestStatus

MAX_MESSAGE_CHARS = 500
_FAILING = (TestStatus.FAILED, TestStatus.ERROR)


class UnknownTest(LookupError):
    """No failed test of the release by that name."""


def failure_suspects(release: Release, test: str) -> dict[str, Any]:
    if not test:
        raise QueryError("test is required: a failed test's name or classname::name")
    classname, _, name = test.rpartition("::")
    wanted = Q(name=name, classname=classname) if classname else Q(name=name)
    case = (
        TestCase.objects.filter(wanted, release=release, status__in=_FAILING)
        .order_by("-attempt", "-id")
        .first()
    )
    if case is None:
        raise UnknownTest(f"No failed test named {test[:200]!r} in release {release.version}.")
    stored = case.suspects or {}
    ranked = [Suspect(**s) for s in stored.get("ranked", [])]
    lines = stored.get("lines", {})
    history = TestHistory(label=case.label, file=case.file, suite=case.suite, outcome="failed",
                          flaky_here=False)  # fmt: skip
    if case.suspects is None:
        summary = (
            "Not computed: the release's commits came without the lines they changed (sent "
            "by `detective ingest --git-range`, or `manage.py ingest --git-repo` with the report)."
        )
    elif ranked:
        summary = suspect_sentence(history, ranked[0])
    else:
        summary = f"{case.label}: {NO_SUSPECT}"
    return {
        "test": case.label,
        "file": stored.get("test_path") or case.file,
        "failure_type": case.failure_type,
        "failure_message": case.failure_message[:MAX_MESSAGE_CHARS],
        "computed": case.suspects is not None,
        "summary": summary,
        "frames": stored.get("frames", []),
        "suspects": [
            {
                "rank": rank,
                "sha": s.sha,
                "short_sha": s.sha[:7],
                "subject": s.subject,
                "author": s.author,
                "tier": s.tier,
                "path": s.path,
                "line": s.line,
                "distance": s.distance,
                "reason": s.reason,
                "changed_lines_at_head": [
                    {"path": p, "start": a, "end": b, "deleted": d}
                    for p, a, b, d in lines.get(s.sha, [])
                ],
            }
            for rank, s in enumerate(ranked, start=1)
        ],
    }
