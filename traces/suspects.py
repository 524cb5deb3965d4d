"""The first suspect commit of an error group: its in-app frames mapped onto the release's
changed files by path suffix (a deployed `/srv/app/shop/pricing.py` is the repository's
`shop/pricing.py`, as Sentry's code mappings do it) and ranked against the release's ingested
hunks (and the head's blame, where the CI client sent it) by the same engine as a failed
test's (`risk.suspects.rank_suspects`), over the commits in the order
`sources.services.suspects` gives them."""

from __future__ import annotations

from dataclasses import dataclass

from detective_client.hunks import FileHunks, Hunk
from releases.models import Release
from risk import suspects as ranking
from sources.models import CommitFile, ReleaseHead
from sources.parsers.tracebacks import RepoPaths
from sources.services.suspects import _newest_first
from traces.models import ErrorGroup


@dataclass(frozen=True)
class _Frame:
    path: str
    line: int
    function: str
    in_repo: bool


def suspect_for(release: Release, group: ErrorGroup) -> ranking.Suspect | None:
    """The group's first suspect among the release's commits, or None (no hunks ingested, or
    no frame in a file the release changed)."""
    if not group.frames:
        return None
    files = list(
        CommitFile.objects.filter(commit__release=release, hunks__isnull=False).values_list(
            "commit__sha", "path", "old_path", "hunks"
        )
    )
    if not files:
        return None
    repo = RepoPaths({path for _, path, _, _ in files})
    frames = [
        _Frame(mapped, line, function, True)
        for path, line, function in group.frames
        if isinstance(line, int) and (mapped := repo.match(path)) is not None
    ]
    if not frames:
        return None
    by_sha: dict[str, list[FileHunks]] = {}
    for sha, path, old_path, hunks in files:
        by_sha.setdefault(sha, []).append(
            FileHunks(path, old_path or None, tuple(Hunk(*h) for h in hunks))
        )
    commits = [
        ranking.RangeCommit(c.sha, c.subject, c.author_name, tuple(by_sha.get(c.sha, ())))
        for c in _newest_first(list(release.commits.all()))
    ]
    head = ReleaseHead.objects.filter(release=release).first()
    blamed = [
        ranking.ChangedRange(path, start, end, sha)
        for path, ranges in (head.blame if head else {}).items()
        for start, end, sha in ranges
    ]
    at_head = ranking.with_blame(ranking.lines_at_head(commits), blamed)
    ranked = ranking.rank_suspects(ranking.Failure(test_path="", frames=frames), commits, at_head)
    return ranked[0] if ranked else None
