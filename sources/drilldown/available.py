"""Which drill-downs have something to show for a release, in a line each, for its summary
(`releases.drilldown_hooks`): counts only, a few cheap queries."""

from __future__ import annotations

from django.db.models import Count

from releases.models import Release
from sources.drilldown.metrics import samples_counted
from sources.drilldown.tests import STATUSES, last_attempts
from sources.models import Commit, CommitFile


def available(release: Release) -> dict[str, str]:
    found: dict[str, str] = {}
    counts = dict.fromkeys(STATUSES, 0)
    for outcome, n in (
        last_attempts(release).order_by().values_list("outcome").annotate(n=Count("pk"))
    ):
        counts[STATUSES[outcome]] = n
    if counts["failed"] or counts["flaky"]:
        found["tests"] = (
            f"{_count(counts['failed'], 'failed test')}, {counts['flaky']} flaky: details "
            "available (each test's failure and its history in the service)"
        )
    commits = Commit.objects.filter(release=release).count()
    if commits:
        files = CommitFile.objects.filter(commit__release=release).values("path").distinct()
        found["changes"] = (
            f"{_count(commits, 'commit')} over {_count(files.count(), 'file')}: details "
            "available (files, lines, critical areas, authors)"
        )
    metrics = [
        f"{metric} ({current} samples in this release's window, {baseline} in the baseline)"
        for metric, (current, baseline) in samples_counted(release).items()
        if current
    ]
    if metrics:
        found["metrics"] = "history available for " + "; ".join(metrics)
    return found


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
