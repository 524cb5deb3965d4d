"""What ties a suspect's change to a failing test through the functions of a module: the function
the change sits in is one the test calls (or the failure names), one such a function calls,
or one whose text mentions such a name; and how rare that name is among the module's functions
(`convert`, in every class, says less than `IntRange`). Plain Python over the scopes the CI
client or a checkout read (`risk.suspects.Scope`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["MAX_CALL_STEPS", "NamedScope", "call_reach", "name_counts", "named_scope", "why_named"]

MAX_CALL_STEPS = 4
HUB_FLOOR, HUB_SHARE = 3, 5  # a name in more than max(3, a fifth of the functions) is a hub


class ScopeLike(Protocol):
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def words(self) -> frozenset[str]: ...
    @property
    def name(self) -> str: ...


class RangeLike(Protocol):
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def deleted(self) -> bool: ...


@dataclass(frozen=True)
class NamedScope:
    rarity: int  # in how many of the module's functions `name` occurs
    name: str  # the name the test calls or the failure gives
    scope: str  # the function the change sits in ("" when it has none)
    called: bool  # the function is that name's, or one it calls; else its text only mentions it
    through: tuple[str, ...] = ()  # the functions between, when reached by calls

    @property
    def key(self) -> tuple[int, int]:
        return (self.rarity, 0 if self.called else 1)


def name_counts(scopes: Sequence[ScopeLike], names: frozenset[str]) -> dict[str, int]:
    """In how many of the module's functions each of `names` occurs (its name or its text)."""
    counts: dict[str, int] = {}
    for scope in scopes:
        for name in (scope.words | {scope.name}) & names:
            counts[name] = counts.get(name, 0) + 1
    return counts


def call_reach(scopes: Sequence[ScopeLike], names: frozenset[str]) -> dict[int, tuple[str, ...]]:
    """The module's functions a name of `names` calls, within `MAX_CALL_STEPS`: index → the
    chain of names from that root to the function (root first)."""
    by_name: dict[str, list[int]] = {}
    for index, scope in enumerate(scopes):
        if scope.name:
            by_name.setdefault(scope.name, []).append(index)
    # A name in many of the module's texts (`parse` in every docstring's example) is a hub, no
    # evidence of a call: links through it are not followed.
    hub = max(HUB_FLOOR, len(scopes) // HUB_SHARE)
    mentions: dict[str, int] = {}
    for scope in scopes:
        for word in scope.words:
            if word in by_name:
                mentions[word] = mentions.get(word, 0) + 1
    reached = {i: (scopes[i].name,) for n in names for i in by_name.get(n, ())}
    level = list(reached)
    for _ in range(MAX_CALL_STEPS):
        following: list[int] = []
        for index in level:
            for word in sorted(scopes[index].words):
                if mentions.get(word, 0) > hub:
                    continue
                for callee in by_name.get(word, ()):
                    if callee not in reached:
                        reached[callee] = (*reached[index], scopes[callee].name)
                        following.append(callee)
        level = following
    return reached


def named_scope(
    changed: RangeLike,
    scopes: Sequence[ScopeLike],
    names: frozenset[str],
    reach: dict[int, tuple[str, ...]] | None = None,
    counts: dict[str, int] | None = None,
) -> NamedScope | None:
    """The strongest tie between the function the changed lines sit in and `names`; None if
    the lines sit in no function or nothing ties it."""
    if changed.deleted:  # the gap's two lines: a function's last line removed reaches past it
        around = [
            i for i, s in enumerate(scopes) if s.start <= changed.end and changed.start <= s.end
        ]
    else:
        around = [
            i for i, s in enumerate(scopes) if s.start <= changed.start and changed.end <= s.end
        ]
    if not names or not around:
        return None
    index = min(around, key=lambda i: scopes[i].end - scopes[i].start)
    innermost = scopes[index]
    reach = call_reach(scopes, names) if reach is None else reach

    counts = name_counts(scopes, names) if counts is None else counts

    def rarity(name: str) -> int:
        return counts.get(name, 0)

    options: list[NamedScope] = []
    if index in reach:
        chain = reach[index]
        options.append(NamedScope(rarity(chain[0]), chain[0], innermost.name, True, chain[1:-1]))
    for name in innermost.words & names:
        options.append(NamedScope(rarity(name), name, innermost.name, False))
    if not options:
        return None
    return min(options, key=lambda o: (*o.key, len(o.through), o.name))


def why_named(found: NamedScope, test: str, called: frozenset[str]) -> str:
    """The evidence in words: "its change is in `loads`, which test_newline_escape calls"."""
    who = f"{test} calls" if found.name in called else "the failure names"
    scope = f"`{found.scope}`" if found.scope else "a function"
    if found.called and found.scope == found.name:
        return f"its change is in {scope}, which {who}"
    if found.called:
        steps = ", ".join(f"`{n}`" for n in found.through)
        through = f" (through {steps})" if steps else ""
        return f"its change is in {scope}, which `{found.name}` calls{through}, which {who}"
    return f"its change is in {scope}, which mentions `{found.name}`, which {who}"
