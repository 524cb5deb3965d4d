"""How the verdict reads the policy's own judgement of a release, without importing sources.

Why a hook: a release's verdict (`release_verdict.py`) falls back on the policy's verdict when
no model has filed a report on the data the release has now (issue 37), and the policy judges a
stored release with its history (earlier tests, commits and the suspects of a failure), which
the sources app keeps (`sources.judging.judge_release`). sources builds on releases, so
`SourcesConfig.ready` installs its judge here (sources/apps.py). Without it (a site without the
sources app) the policy judges the release's own figures, with no history.
"""

from __future__ import annotations

from collections.abc import Callable

from releases.models import Release
from releases.verdicts import Judged, judge_summary, previous_p95

Judge = Callable[[Release], Judged]

_installed: list[Judge] = []


def install(judge: Judge) -> None:
    _installed[:] = [judge]


def judge(release: Release) -> Judged:
    if _installed:
        return _installed[0](release)
    return judge_summary(release.as_summary(), previous=previous_p95(release))
