"""What ties a suspect's change to a failing test through the functions of a module: the function
the change sits in is one the test calls (or the failure names), one such a function calls,
or one whose text mentions such a name; and how rare that name is among the module's functions
(`convert`, in every class, says less than `IntRange`). Plain Python over the scopes the CI
client or a checkout read (`risk.suspects.Scope`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

__all__ = [
    "MAX_CALL_STEPS",
    "NamedScope",
    "call_reach",
    "modules_named",
    "name_counts",
    "named_scope",
    "why_named",
]

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


_R = TypeVar("_R", bound=RangeLike)


@dataclass(frozen=True)
class NamedScope:
    # In how many of the functions `name` occurs; a call chain counts its commonest link.
    rarity: int
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


def call_reach(
    scopes: Sequence[ScopeLike],
    names: frozenset[str],
    counts: dict[str, int] | None = None,
) -> dict[int, tuple[str, ...]]:
    """The functions a name of `names` calls, within `MAX_CALL_STEPS`: index → the chain of
    names from that root to the function (root first). `scopes` may span several modules (a
    CLI's `cmd_bump` in one calls `bump_minor` in another): a call is a function's text naming
    another function. Where several names reach a function, the chain whose commonest link is
    the rarest (`chain_rarity`), then the shortest, is kept, so the same inputs always give
    the same chain."""
    by_name: dict[str, list[int]] = {}
    for index, scope in enumerate(scopes):
        if scope.name:
            by_name.setdefault(scope.name, []).append(index)
    # A name in many of the functions' texts (`parse` in every docstring's example) is a hub,
    # no evidence of a call: links through it are not followed.
    hub = max(HUB_FLOOR, len(scopes) // HUB_SHARE)
    mentions: dict[str, int] = {}
    for scope in scopes:
        for word in scope.words:
            if word in by_name:
                mentions[word] = mentions.get(word, 0) + 1
    counts = link_counts(scopes, names) if counts is None else counts
    reached: dict[int, tuple[str, ...]] = {}
    for root in sorted(n for n in names if n in by_name):
        mine = dict.fromkeys(by_name[root], (root,))
        level = list(mine)
        for _ in range(MAX_CALL_STEPS):
            following: list[int] = []
            for index in level:
                for word in sorted(scopes[index].words):
                    if mentions.get(word, 0) > hub:
                        continue
                    for callee in by_name.get(word, ()):
                        if callee not in mine:
                            mine[callee] = (*mine[index], scopes[callee].name)
                            following.append(callee)
            level = following
        for index, chain in mine.items():
            if index not in reached or _chain_key(chain, counts) < _chain_key(
                reached[index], counts
            ):
                reached[index] = chain
    return reached


def _chain_key(chain: tuple[str, ...], counts: dict[str, int]) -> tuple[int, int, str]:
    return (chain_rarity(chain, counts), len(chain), chain[0])


_CALLERS = "<-"  # a key of `link_counts`: how many other functions name a function


def link_counts(scopes: Sequence[ScopeLike], names: frozenset[str]) -> dict[str, int]:
    """`name_counts` of `names`, and for every function's name (a call chain's links), keyed
    `_CALLERS` + name, in how many other functions' text it occurs (its callers)."""
    counts = name_counts(scopes, names)
    defined = {s.name for s in scopes if s.name}
    for scope in scopes:
        for word in (scope.words & defined) - {scope.name}:
            counts[_CALLERS + word] = counts.get(_CALLERS + word, 0) + 1
    return counts


def chain_rarity(chain: tuple[str, ...], counts: dict[str, int]) -> int:
    """A call chain is as telling as its commonest link: the root's rarity, or a later link's
    number of callers where that is larger. `bump_build` → `_increment_string` → `match` →
    `compare` → `_cmp` says little of `_cmp` when `match` is in many functions' text (a regular
    expression's `match` as well as the method); `loads` → `parse_pair` → `unescape`, each
    called from one place, says as much as `loads`."""
    return max([counts.get(chain[0], 0), *(counts.get(_CALLERS + link, 0) for link in chain[1:])])


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
    counts = link_counts(scopes, names) if counts is None else counts
    reach = call_reach(scopes, names, counts) if reach is None else reach

    def rarity(name: str) -> int:
        return counts.get(name, 0)

    options: list[NamedScope] = []
    if index in reach:
        chain = reach[index]
        options.append(
            NamedScope(chain_rarity(chain, counts), chain[0], innermost.name, True, chain[1:-1])
        )
    for name in innermost.words & names:
        options.append(NamedScope(rarity(name), name, innermost.name, False))
    if not options:
        return None
    return min(options, key=lambda o: (*o.key, len(o.through), o.name))


def modules_named(
    paths: Iterable[str],
    scopes: Mapping[str, Sequence[ScopeLike]],
    owned: Mapping[str, Sequence[_R]],
    names: frozenset[str],
) -> Iterator[tuple[tuple[str, _R], NamedScope]]:
    """Each changed range of `paths` (`owned`, by path) tied to `names`, with its tie: calls
    followed across all of `paths`' functions at once (the test calls `cmd_bump` in cli.py,
    whose text names `bump_minor` in version.py), and a name's rarity counted over them all, so
    ties in different modules are weighed alike."""
    modules = sorted(p for p in paths if scopes.get(p))
    flat: list[ScopeLike] = []
    first: dict[str, int] = {}
    for path in modules:
        first[path] = len(flat)
        flat += scopes[path]
    if not flat or not names:
        return
    counts = link_counts(flat, names)
    reach = call_reach(flat, names, counts)
    for path in modules:
        start, module = first[path], scopes[path]
        local = {i - start: c for i, c in reach.items() if start <= i < start + len(module)}
        for r in owned.get(path, ()):
            found = named_scope(r, module, names, local, counts)
            if found is not None:
                yield (path, r), found


def why_named(found: NamedScope, test: str, called: frozenset[str]) -> str:
    """The evidence in words: "its change is in `loads`, which test_newline_escape calls"."""
    if found.name in called:
        who = f"{test} calls"
    elif re.search(rf"\[.*\b{re.escape(found.name)}\b", test):  # test_cli[cmd_bump-args1]
        who = f"{test}'s parameters name"
    else:
        who = "the failure names"
    scope = f"`{found.scope}`" if found.scope else "a function"
    if found.called and found.scope == found.name:
        return f"its change is in {scope}, which {who}"
    if found.called:
        steps = ", ".join(f"`{n}`" for n in found.through)
        through = f" (through {steps})" if steps else ""
        return f"its change is in {scope}, which `{found.name}` calls{through}, which {who}"
    return f"its change is in {scope}, which mentions `{found.name}`, which {who}"
