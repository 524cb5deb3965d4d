"""A release's code changes: its commits with their files, the totals, the critical areas they
touch and their authors' earlier commits in the service, for
`GET /api/releases/<version>/changes`.

`path_prefix` keeps the commits that change a file under it (and lists those files only);
`area` keeps the commits that touch one of the policy's critical areas, read as the policy
reads them (`risk.signal`): by the areas' words and a database upgrade or schema
change in the message, by the words and `critical_paths` globs in the changed paths. The totals
are of the whole release and of what the filters kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from django.db.models import Count, Min

from releases import verdicts
from releases.models import Release
from releases.release_order import earlier_releases
from risk.settings import SCHEMA_AREA, PolicySettings
from risk.signal import change_areas, path_areas
from sources.drilldown.paging import PageBounds
from sources.models import Commit, CommitFile

MAX_FILES_PER_COMMIT = 20
MAX_SUBJECT_CHARS = 300
MAX_PATH_CHARS = 300


def policy_settings() -> PolicySettings:
    return verdicts.settings_of(verdicts.current_policy())


def known_areas(cfg: PolicySettings) -> list[str]:
    return sorted({*cfg.critical_areas, *cfg.critical_paths, SCHEMA_AREA})


def areas_of(commit: Commit, paths: Sequence[str], cfg: PolicySettings) -> list[str]:
    """The critical areas a commit names in its message or touches by its paths."""
    found = set(change_areas(commit.message, cfg))
    for path in paths:
        found.update(path_areas(path, cfg))
    return sorted(found)


def code_changes(
    release: Release, *, path_prefix: str, area: str, page: PageBounds
) -> dict[str, Any]:
    cfg = policy_settings()
    commits = list(
        Commit.objects.filter(release=release)
        .order_by("authored_at", "sha")
        .prefetch_related("files")
    )
    touched = {c.pk: areas_of(c, [f.path for f in c.files.all()], cfg) for c in commits}
    kept = [
        commit
        for commit in commits
        if (not path_prefix or _files(commit, path_prefix))
        and (not area or area in touched[commit.pk])
    ]
    window = kept[page.offset : page.offset + page.limit]
    earlier = _earlier_commits(release, {c.author_email for c in window if c.author_email})
    items = [_entry(commit, touched[commit.pk], path_prefix, earlier) for commit in window]
    per_area = Counter[str]()
    for names in touched.values():
        per_area.update(names)
    return {
        "release_id": release.version,
        "filters": {"path_prefix": path_prefix or None, "area": area or None},
        "critical_areas_known": known_areas(cfg),
        # Per critical area, how many of the release's commits touch it.
        "critical_areas_touched": dict(sorted(per_area.items())),
        "totals": {
            "release": _totals(commits, ""),
            "kept": _totals(kept, path_prefix),
        },
        **page.frame(len(kept), items),
        "commits": items,
    }


def _files(commit: Commit, path_prefix: str) -> list[CommitFile]:
    return [f for f in commit.files.all() if not path_prefix or f.path.startswith(path_prefix)]


def _totals(commits: Sequence[Commit], path_prefix: str) -> dict[str, int]:
    """Lines, files and directories (the spread of a change) of these commits' files."""
    files = [f for commit in commits for f in _files(commit, path_prefix)]
    paths = {f.path for f in files}
    return {
        "commits": len(commits),
        "files": len(paths),
        "directories": len({path.rsplit("/", 1)[0] if "/" in path else "." for path in paths}),
        "lines_added": sum(f.added or 0 for f in files),
        "lines_deleted": sum(f.deleted or 0 for f in files),
    }


def _earlier_commits(release: Release, emails: set[str]) -> dict[str, dict[str, Any]]:
    """Per author (by email), their commits in the service's releases before this one."""
    if not emails:
        return {}
    rows = (
        Commit.objects.filter(
            release__in=earlier_releases(release).order_by().values("id"),
            author_email__in=emails,
        )
        .values("author_email")
        .annotate(n=Count("sha", distinct=True), first=Min("authored_at"))
    )
    return {row["author_email"]: row for row in rows}


def _entry(
    commit: Commit, areas: list[str], path_prefix: str, earlier: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    files = _files(commit, path_prefix)
    before = earlier.get(commit.author_email, {})
    return {
        "sha": commit.sha[:12],
        "subject": commit.subject[:MAX_SUBJECT_CHARS],
        "type": commit.change_type,
        "scope": commit.scope or None,
        "breaking": commit.breaking,
        "merge": commit.is_merge,
        "author": commit.author_name[:100],
        "author_earlier_commits_in_service": before.get("n", 0),
        "authored_at": commit.authored_at.isoformat(),
        "critical_areas": areas,
        "lines_added": sum(f.added or 0 for f in files),
        "lines_deleted": sum(f.deleted or 0 for f in files),
        "file_count": len(files),
        "files": [
            {
                "path": f.path[:MAX_PATH_CHARS],
                **({"old_path": f.old_path[:MAX_PATH_CHARS]} if f.old_path else {}),
                "added": f.added,
                "deleted": f.deleted,
                **({"binary": True} if f.binary else {}),
                # Said so, as the policy says them apart: their lines are not the change's size.
                **({"generated": True} if f.generated else {}),
                **({"vendored": True} if f.vendored else {}),
                **({"removed": True} if f.removed else {}),
            }
            for f in files[:MAX_FILES_PER_COMMIT]
        ],
        **(
            {"files_cut": f"{MAX_FILES_PER_COMMIT} of {len(files)} files listed"}
            if len(files) > MAX_FILES_PER_COMMIT
            else {}
        ),
    }
