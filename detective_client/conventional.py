"""Conventional Commits (https://www.conventionalcommits.org/en/v1.0.0/): the type, scope and
breaking flag of a commit message, as a pure function.

`feat(api)!: drop v1` is type feat, scope api, breaking; a footer `BREAKING CHANGE: ...` (or
`BREAKING-CHANGE:`) makes any commit breaking. A message whose first line is not of the form
`type(scope)?!?: subject` has no type and no scope (it may still be breaking by its footer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER = re.compile(
    r"^(?P<type>[A-Za-z][A-Za-z0-9-]*)"
    r"(?:\((?P<scope>[^()\r\n]*)\))?"
    r"(?P<bang>!)?"
    r": (?P<subject>\S.*)$"
)
_FOOTER = re.compile(r"^BREAKING[ -]CHANGE: ?\S", re.MULTILINE)


@dataclass(frozen=True)
class Conventional:
    type: str | None
    scope: str | None
    breaking: bool


def classify(message: str) -> Conventional:
    header, _, body = message.strip().partition("\n")
    match = _HEADER.match(header.strip())
    # The footer lives after the header and a blank line; a subject that merely mentions it
    # ("docs: explain BREAKING CHANGE: footers") is not one.
    footer_breaking = bool(_FOOTER.search(body))
    if match is None:
        return Conventional(type=None, scope=None, breaking=footer_breaking)
    scope = (match["scope"] or "").strip() or None
    return Conventional(
        type=match["type"].lower(),
        scope=scope,
        breaking=bool(match["bang"]) or footer_breaking,
    )
