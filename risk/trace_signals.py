"""The risk policy's signal from what the running version does (its OTLP traces, issue 36): a
new error group, one the service never showed in its earlier releases nor this release in its
baseline (the minutes before its deploy time), is medium; high when it hits a share of its
route's requests (`new_error_group_high_share_at_or_above`) or when its in-app frames run
through a critical area (`new_error_group_in_critical_area_level`), by the same path globs
that put a changed file in one (`risk.signal.path_areas`: `change_area_paths` and the
service's `critical_paths`).

Plain facts in (`TraceFacts`, read from the `traces` app's tables by `traces.history`), one
signal out, whose sentence names the exception, its innermost in-app frame, the route and the
counts, and the first suspect commit where the frames run through the release's changed lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from risk.settings import LEVEL_RANK, PolicySettings
from risk.signal import Signal, path_areas, pct, plural
from risk.suspects import Suspect

__all__ = [
    "NEW_ERROR_GROUPS",
    "REGRESSED_ERROR_GROUPS",
    "ErrorGroupFacts",
    "TraceFacts",
    "critical_frames",
    "new_error_groups",
    "regressed_error_groups",
    "sentence",
]

NEW_ERROR_GROUPS = "new_error_groups"
REGRESSED_ERROR_GROUPS = "regressed_error_groups"


@dataclass(frozen=True, slots=True)
class ErrorGroupFacts:
    fingerprint: str
    exception_type: str
    # The innermost in-app frame, as the repository names it where it could be matched.
    path: str
    function: str
    # Occurrences since the deploy time, and before it (the release's baseline).
    count: int
    baseline_count: int
    # Seen in any earlier release of the service.
    seen_before: bool
    # The route it hit most, and that route's requests and errors since the deploy time.
    route: str
    route_requests: int
    suspect: Suspect | None = None
    # Seen in the service's previous release (the one deployed just before this one).
    seen_in_previous: bool = False
    # Every in-app frame's path, outermost first: the repository's where the release's
    # files matched it, else as deployed (`/srv/app/payments/charge.py`).
    frame_paths: tuple[str, ...] = ()

    @property
    def is_new(self) -> bool:
        return self.count > 0 and self.baseline_count == 0 and not self.seen_before

    @property
    def is_regressed(self) -> bool:
        """Seen in an earlier release, absent from the previous one, back in this one."""
        return self.count > 0 and self.seen_before and not self.seen_in_previous

    @property
    def share(self) -> float | None:
        return self.count / self.route_requests if self.route_requests else None


@dataclass(frozen=True, slots=True)
class TraceFacts:
    version: str
    groups: tuple[ErrorGroupFacts, ...] = ()


def critical_frames(group: ErrorGroupFacts, cfg: PolicySettings) -> tuple[str, list[str]]:
    """The innermost frame path in a critical area, and the areas of all its frames ("", []
    when none is)."""
    found: set[str] = set()
    innermost = ""
    for path in group.frame_paths:
        if areas := path_areas(path, cfg):
            found.update(areas)
            innermost = path
    return innermost, sorted(found)


def _area_clause(group: ErrorGroupFacts, cfg: PolicySettings) -> str:
    path, areas = critical_frames(group, cfg)
    if not areas:
        return ""
    kind = "a critical area" if len(areas) == 1 else "critical areas"
    return f"; its frames run through {path}: {', '.join(areas)}, {kind}"


def sentence(group: ErrorGroupFacts, version: str, cfg: PolicySettings | None = None) -> str:
    where = f" in {group.path} `{group.function}`" if group.path else ""
    if group.route_requests and group.route:
        counted = f"{group.count:,} of {plural(group.route_requests, 'request')} of {group.route}"
    elif group.route:
        counted = f"{plural(group.count, 'time')} in {group.route}"
    else:
        counted = plural(group.count, "time")
    text = f"{group.exception_type}{where}: {counted} since {version} (none before)"
    text += "; new in this release"
    if cfg is not None:
        text += _area_clause(group, cfg)
    if group.suspect is not None:
        s = group.suspect
        text += f"; first suspect {s.sha[:7]} '{s.subject}' ({s.author}), whose change is " + (
            "on that line" if s.distance == 0 else "near that line" if s.line else "in that file"
        )
    return text


def new_error_groups(facts: TraceFacts | None, cfg: PolicySettings) -> list[Signal]:
    if facts is None:
        return []
    new = sorted((g for g in facts.groups if g.is_new), key=lambda g: (-g.count, g.fingerprint))
    if not new:
        return []
    high_at = cfg.new_error_group_high_share_at_or_above
    shares = [g.share for g in new if g.share is not None]
    top_share = max(shares, default=None)
    level = cfg.new_error_group_level
    if high_at is not None and top_share is not None and top_share >= high_at:
        level = "high"
    in_area = [g for g in new if critical_frames(g, cfg)[1]]
    elsewhere = [g for g in new if not critical_frames(g, cfg)[1]]
    area_level = cfg.new_error_group_in_critical_area_level
    if in_area and LEVEL_RANK[area_level] > LEVEL_RANK[level]:
        level = area_level
    # The groups in a critical area are said first: they are why the level is what it is.
    new = in_area + elsewhere
    sentences: Sequence[str] = [sentence(g, facts.version, cfg) for g in new[:3]]
    detail = "; ".join(sentences)
    if len(new) > 3:
        detail += f"; and {len(new) - 3} more new error groups"
    threshold = "any new error group is " + cfg.new_error_group_level
    if high_at is not None:
        threshold += f"; high from {pct(high_at)} of its route's requests"
    threshold += f"; {area_level} when its frames run through a critical area"
    found_areas = sorted({a for g in in_area for a in critical_frames(g, cfg)[1]})
    return [
        Signal(
            name=NEW_ERROR_GROUPS,
            label="New errors in production",
            level=level,
            critical=cfg.new_error_group_critical,
            figure=len(new),
            threshold=threshold,
            detail=detail,
            areas=tuple(found_areas),
        )
    ]


def regressed_error_groups(facts: TraceFacts | None, cfg: PolicySettings) -> list[Signal]:
    """A group an earlier release showed, the previous one did not, and this one does again:
    a fixed exception come back (`regressed_error_group_level`, medium by default)."""
    if facts is None:
        return []
    back = sorted(
        (g for g in facts.groups if g.is_regressed), key=lambda g: (-g.count, g.fingerprint)
    )
    if not back:
        return []
    sentences = []
    for group in back[:3]:
        where = f" in {group.path} `{group.function}`" if group.path else ""
        on = f" of {group.route}" if group.route else ""
        sentences.append(
            f"{group.exception_type}{where}: {plural(group.count, 'time')}{on} since "
            f"{facts.version}; seen in an earlier release, not in the previous one: regressed"
        )
    return [
        Signal(
            name=REGRESSED_ERROR_GROUPS,
            label="Errors back in production",
            level=cfg.regressed_error_group_level,
            critical=False,
            figure=len(back),
            threshold=f"any regressed error group is {cfg.regressed_error_group_level}",
            detail="; ".join(sentences),
        )
    ]
