"""The risk policy's signals that read a release's change (`risk.history.ChangeFacts`): code
in a critical area (by its files, risk/changes.py), an area only named in a person's commit
subject, breaking changes, the size and spread of the code judged against the service's own
releases, and authors new to the files they change.

Split from risk/history_signals.py, which gives these with the failures' and metrics' signals.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import median

from risk.changes import (
    CODE_KINDS,
    CommitFacts,
    is_dependency_subject,
    path_area_matches,
    subject_areas,
)
from risk.history import AuthorFacts, ChangeFacts, spread_entropy
from risk.settings import SCHEMA_AREA, Level, PolicySettings
from risk.signal import NAMED, Signal, path_areas, schema_change_in, shown
from risk.signal import listed as _listed
from risk.signal import plural as _plural


def _areas_of(cfg: PolicySettings) -> Callable[[str], list[str]]:
    """`path_areas` under these settings, each path read once (a long range names the same
    files in many commits: 5,000 commits took 1.8 s without)."""
    return functools.cache(lambda path: path_areas(path, cfg))


def _area_commits(changes: ChangeFacts) -> list[CommitFacts]:
    """The commits whose files can put the release in an area: a person's, not a merge's
    (its commits are in the range), a dependency bump's or a bot's."""
    return [c for c in changes.commit_list if not c.bot and c.kind not in ("merge", "dependencies")]


def changed_areas(changes: ChangeFacts, cfg: PolicySettings) -> dict[str, list[str]]:
    """Per critical area, what of the change lies in it: the code files in the area's paths
    (`change_area_paths`, a service's `critical_paths`), and a person's commits whose subject
    describes a database upgrade or schema change. Bots' commits and dependency bumps put a
    release in no area; their words never do."""
    found: dict[str, list[str]] = {}
    if not changes.commit_list:
        # Facts without their commits (an older reader): the files and subjects alone.
        for path in changes.paths:
            for area in path_areas(path, cfg):
                found.setdefault(area, []).append(path)
        for message in changes.messages:
            subject = message.split("\n", 1)[0]
            if not is_dependency_subject(subject) and schema_change_in(subject, cfg):
                found.setdefault(SCHEMA_AREA, []).append(f'the commit "{subject}"')
        return found
    areas_of = _areas_of(cfg)
    # Per area its items in the order first seen, once each (a dict keeps order).
    seen: dict[str, dict[str, None]] = {}
    for commit in _area_commits(changes):
        for f in commit.code_files:
            for area in areas_of(f.path):  # code_files already left generated files out
                seen.setdefault(area, {})[f.path] = None
        if schema_change_in(commit.subject, cfg):
            seen.setdefault(SCHEMA_AREA, {})[f"the commit {commit.named}"] = None
    return {area: list(items) for area, items in seen.items()}


def subject_mentions(changes: ChangeFacts, cfg: PolicySettings) -> dict[str, list[str]]:
    """Per area, a person's commits whose subject names it as a whole word but whose code
    lies outside it: "Fix the login redirect" changing `app/views.py`."""
    found: dict[str, list[str]] = {}
    areas_of = _areas_of(cfg)
    for commit in _area_commits(changes):
        if commit.kind not in ("code", "revert"):
            # A docs, tests-only or CI commit changes no code whatever its subject names.
            continue
        in_code = {area for f in commit.code_files for area in areas_of(f.path)}
        for area in subject_areas(commit.subject, cfg.critical_areas):
            if area not in in_code:
                found.setdefault(area, []).append(commit.named)
    return found


def breaking_changes(changes: ChangeFacts, cfg: PolicySettings) -> list[str]:
    """What in the change breaks its users: commits marked breaking the Conventional Commits
    way (`feat(api)!:`, a `BREAKING CHANGE:` footer), and public API files (`public_api_paths`)
    renamed away or deleted (git's status D), each named with the commit that did it: a
    removed route breaks its callers whether or not the commit says so."""
    found = [f"the commit {c.named}" for c in changes.commit_list if c.breaking and not c.bot]
    public = {"api": cfg.public_api_paths}
    for commit in changes.commit_list:
        for f in commit.files:
            if (
                f.old_path
                and path_area_matches(f.old_path, public)
                and not path_area_matches(f.path, public)
            ):
                found.append(f"{f.old_path} (moved to {f.path})")
            elif f.removed and path_area_matches(f.path, public):
                found.append(f"{f.path} (deleted in the commit {commit.named})")
    return found


def change_signals(changes: ChangeFacts, cfg: PolicySettings) -> list[Signal]:
    signals = [_change_size(changes, cfg)]
    areas = changed_areas(changes, cfg)
    if areas:
        count = len({item for items in areas.values() for item in items})
        listed = "; ".join(f"{area}: {_listed(items)}" for area, items in sorted(areas.items()))
        signals.append(
            Signal(
                name="critical_paths",
                label="Changed code in a critical area",
                level=cfg.risky_changes_level,
                critical=False,
                figure=count,
                threshold=f"{cfg.risky_changes_level} from 1 changed code file in a critical "
                "area's paths, or a person's commit describing a schema change",
                detail=f"The change touches {', '.join(sorted(areas))} ({listed})",
                areas=tuple(sorted(areas)),
            )
        )
    mentions = {a: c for a, c in subject_mentions(changes, cfg).items() if a not in areas}
    if mentions:
        listed = "; ".join(f"{area}: {_listed(items)}" for area, items in sorted(mentions.items()))
        signals.append(
            Signal(
                name="subject_mentions",
                label="Commit subjects that name a critical area",
                level=cfg.subject_mention_level,
                critical=False,
                figure=len({c for items in mentions.values() for c in items}),
                threshold=f"{cfg.subject_mention_level} for an area named as a whole word in a "
                "person's commit subject, with none of the area's code changed",
                detail=f"Commit subjects name {', '.join(sorted(mentions))} but change none of "
                f"its code ({listed})",
                areas=tuple(sorted(mentions)),
            )
        )
    breaking = breaking_changes(changes, cfg)
    if breaking:
        signals.append(
            Signal(
                name="breaking_change",
                label="Breaking changes",
                level=cfg.breaking_change_level,
                critical=False,
                figure=len(breaking),
                threshold=f"{cfg.breaking_change_level} from 1 commit marked breaking "
                "(`!` or a BREAKING CHANGE footer) or a public API file moved away or deleted",
                detail=f"{_plural(len(breaking), 'breaking change')}: {_listed(breaking)}",
            )
        )
    new_authors = changes.new_authors()
    if new_authors:
        critical = [a for a in new_authors if any(path_areas(p, cfg) for p in a.new_files)]
        level = cfg.new_author_in_critical_area_level if critical else cfg.new_author_level
        signals.append(
            Signal(
                name="new_authors",
                label="Authors new to the files they change",
                level=level,
                critical=False,
                figure=len(new_authors),
                threshold=f"{cfg.new_author_level} for an author new to every file they "
                f"change; {cfg.new_author_in_critical_area_level} in a critical area",
                detail="; ".join(_author_sentence(a, cfg) for a in new_authors[:NAMED]),
            )
        )
    return signals


def _author_sentence(author: AuthorFacts, cfg: PolicySettings) -> str:
    areas = sorted({area for p in author.new_files for area in path_areas(p, cfg)})
    where = f", in {', '.join(areas)}" if areas else ""
    dirs = f" ({_listed(list(author.new_directories))})" if author.new_directories else ""
    return (
        f"{shown(author.author)} changed {_plural(len(author.files), 'file')}{where}{dirs} "
        f"and had never committed to {'it' if len(author.files) == 1 else 'any of them'} in "
        "the service's earlier releases"
    )


@dataclass(frozen=True, slots=True)
class _Limits:
    """From how many code lines, files and directories the change is large (None: not
    judged), and whence those numbers come, said after a crossing ("" for the fixed ones)."""

    lines: int | None
    files: int | None
    directories: int | None
    whence: str = ""
    # A service without enough releases of its own: from these lines the size is said (at
    # `large_change_without_history_level`), from `lines` it is large.
    said_from_lines: int | None = None
    # Its own releases, few as they are, make a change below these lines usual: not said.
    usual_below: int | None = None


def _limits(changes: ChangeFacts, cfg: PolicySettings) -> _Limits:
    """The code lines, files and directories from which the change is large, and whence: from
    the service's own earlier releases when there are enough of them, else the fixed numbers
    with a higher line count (a young service's releases are not yet comparable), raised where
    the few releases it has are larger still (commons-lang's 13,000-line releases)."""
    sizes = changes.earlier_code_sizes
    fixed = [
        cfg.large_change_lines_at_or_above,
        cfg.large_change_files_at_or_above,
        cfg.large_change_directories_at_or_above,
    ]
    own = _own_limits(sizes, fixed, cfg)
    if len(sizes) < min(cfg.large_change_history_releases, cfg.history_releases):
        young = cfg.large_change_without_history_lines_at_or_above
        said = fixed[0]
        if young is None or said is None or young <= said:
            return _Limits(*_higher(fixed, own))
        earlier = "no earlier release" if not sizes else _plural(len(sizes), "earlier release")
        return _Limits(
            *_higher([young, fixed[1], fixed[2]], own),
            whence=f"the service has {earlier}, too few to judge its size against",
            said_from_lines=said,
            usual_below=own[0],
        )
    factor = cfg.large_change_history_factor
    whence = (
        f"above the largest of the service's last {_plural(len(sizes), 'release')} and "
        f"{factor:g} times their median"
    )
    return _Limits(*own, whence=whence)


def _own_limits(
    sizes: Sequence[tuple[int, int, int]], fixed: Sequence[int | None], cfg: PolicySettings
) -> list[int | None]:
    """From the service's own releases: past the largest of them and `factor` times their
    median, never below the floors. A minor release among patch releases is larger than their
    median and still usual for the service. No limit where the fixed one is off, or no past."""
    if not sizes:
        return [None, None, None]
    floors = (
        cfg.large_change_lines_floor,
        cfg.large_change_files_floor,
        cfg.large_change_directories_floor,
    )
    factor = cfg.large_change_history_factor
    return [
        None
        if limit is None
        else max(floor, round(factor * median(s[i] for s in sizes)), max(s[i] for s in sizes) + 1)
        for i, (limit, floor) in enumerate(zip(fixed, floors, strict=True))
    ]


def _higher(limits: Sequence[int | None], raised: Sequence[int | None]) -> list[int | None]:
    """Each limit, raised to the other where both are set: a young service's few releases
    can make a change usual for it, never unusual."""
    return [
        None if limit is None else max(limit, other) if other is not None else limit
        for limit, other in zip(limits, raised, strict=True)
    ]


def _said_apart(changes: ChangeFacts) -> str:
    by_kind: dict[str, int] = {}
    for f in changes.files:
        kind = f.kind
        if kind not in CODE_KINDS:
            group = _APART.get(kind, "other files")
            by_kind[group] = by_kind.get(group, 0) + f.added + f.deleted
    parts = [f"{lines:,} in {group}" for group, lines in sorted(by_kind.items()) if lines]
    bumps = [c for c in changes.commit_list if c.kind == "dependencies"]
    if bumps:
        bots = sum(c.bot for c in bumps)
        parts.insert(
            0,
            f"{_plural(len(bumps), 'dependency update')}" + (f" ({bots} by bots)" if bots else ""),
        )
    return f"; apart from the code: {', '.join(parts)}" if parts else ""


_APART = {
    "lock": "lock files and manifests",
    "manifest": "lock files and manifests",
    "test": "tests and their data",
    "docs": "docs",
    "ci": "CI files",
    "vendored": "vendored or generated files",
    "generated": "vendored or generated files",
    "example": "examples",
    "translation": "translations",
}


def _change_size(changes: ChangeFacts, cfg: PolicySettings) -> Signal:
    code = changes.code_files
    lines = sum(f.added + f.deleted for f in code)
    added = sum(f.added for f in code)
    files, dirs = len(code), len(changes.code_directories)
    limits = _limits(changes, cfg)
    whence = f" ({limits.whence})" if limits.whence else ""
    crossed = [
        f"{figure:,} {what}, at or above the {limit:,} that make a change large{whence}"
        for figure, limit, what in (
            (lines, limits.lines, "lines of code"),
            (files, limits.files, "code files"),
            (dirs, limits.directories, "directories"),
        )
        if limit is not None and figure >= limit
    ]
    level: Level = cfg.large_change_level if crossed else "none"
    said = limits.said_from_lines
    if not crossed and said is not None and lines >= max(said, limits.usual_below or 0):
        # Large for most services, unjudged for this one: in the evidence, not raising.
        level = cfg.large_change_without_history_level
        crossed = [
            f"{lines:,} lines of code, at or above the {said:,} that make a change large for "
            f"a service with a history of its own, but {limits.whence}: large from "
            f"{limits.lines:,}"
        ]
    spread = spread_entropy([f.added + f.deleted for f in code])
    how = "evenly" if spread >= 0.8 else "unevenly" if spread >= 0.4 else "mostly in a few"
    subsystems = {f.subsystem for f in code}
    detail = (
        f"The change: {lines:,} lines of code ({added:,} added, {lines - added:,} deleted) in "
        f"{_plural(files, 'file')}, {_plural(dirs, 'directory', 'directories')} and "
        f"{_plural(len(subsystems), 'subsystem')}, spread {how}"
        + (" files" if how == "mostly in a few" else "")
        + f" (entropy {spread:.2f} of 1)"
        + _said_apart(changes)
        + (f"; {'; '.join(crossed)}" if crossed else "")
    )
    shown_limits = [
        f"{what} from {limit:,}"
        for limit, what in (
            (limits.lines, "lines of code"),
            (limits.files, "code files"),
            (limits.directories, "directories"),
        )
        if limit is not None
    ]
    threshold = (
        f"{cfg.large_change_level}: " + ", ".join(shown_limits) if shown_limits else "not judged"
    ) + whence
    if said is not None:
        threshold += f"; {cfg.large_change_without_history_level} from {said:,} lines of code"
    return Signal(
        name="change_size",
        label="Size and spread of the code change",
        level=level,
        critical=False,
        figure=lines,
        threshold=threshold,
        detail=detail,
    )


__all__ = ["breaking_changes", "change_signals", "changed_areas", "subject_mentions"]
