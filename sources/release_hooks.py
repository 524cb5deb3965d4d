"""What apps above `sources` do when a release is made, without sources importing them.

Why a hook, not an import: the `traces` app (issue 36) holds the spans of a version whose
release has not been sent yet, and builds on sources, so sources may not import it;
`TracesConfig.ready` installs its reader here. `upsert_release` calls `made` in the transaction
that makes the release, after its fields (its deploy time) are stored, with the release's row
locked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from releases.models import Release

OnMade = Callable[["Release"], object]

_installed: list[OnMade] = []


def install(hook: OnMade) -> None:
    if hook not in _installed:
        _installed.append(hook)


def made(release: Release) -> None:
    for hook in _installed:
        hook(release)
