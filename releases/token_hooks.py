"""Bearer tokens that other apps issue, for the one call of releases' API they may make: a
release's verdict (`GET /api/releases/<version>/verdict`).

Why a hook, not an import: the release API (releases) takes the tokens sources issues, and
sources stands above releases.

The sources app issues ingestion tokens (a CI job holds one to send its release, and reads the
verdict back with the same token). releases may not import sources, so sources registers a
checker here when it is ready (sources/apps.py): the token in, its scope out (which service it
may read, None for every service), or None when it is not one of its tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class TokenScope:
    name: str  # what the token is called, for an error message
    service_id: int | None  # the one service it may read; None: every service
    service_name: str = ""


class TokenChecker(Protocol):
    def __call__(self, token: str) -> TokenScope | None: ...


_checkers: list[TokenChecker] = []


def register(checker: TokenChecker) -> None:
    if checker not in _checkers:
        _checkers.append(checker)


def scope_for(token: str) -> TokenScope | None:
    for checker in _checkers:
        scope = checker(token)
        if scope is not None:
            return scope
    return None
