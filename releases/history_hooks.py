"""Where the risk policy gets a release's history (`risk.history.History`), without
importing sources.

Why a hook, not an import: sources stands above releases and assessments (its ingestion API
asks for an assessment), and the policy's verdict needs the history kept in sources' tables.

The history is computed from the detail tables of the sources app (commits, test cases, metric
samples), and releases may not import sources; `SourcesConfig.ready` installs its reader here
(sources/apps.py). Without the sources app every release's history is empty, and the policy
reads the summary alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from risk.history import History, ReleaseRef
from risk.settings import PolicySettings

if TYPE_CHECKING:
    from releases.models import Release


class HistoryReader(Protocol):
    def __call__(
        self,
        release: Release,
        *,
        window: int,
        refs: Sequence[ReleaseRef] | None = None,
        settings: PolicySettings | None = None,
    ) -> History: ...


_installed: list[HistoryReader] = []


def install(reader: HistoryReader) -> None:
    _installed[:] = [reader]


def history_of(
    release: Release,
    *,
    window: int,
    refs: Sequence[ReleaseRef] | None = None,
    settings: PolicySettings | None = None,
) -> History:
    """The release's history over its service's last `window` releases (`refs`, when read
    already; `settings`: the policy in force, when read already); empty without a reader."""
    if not _installed:
        return History.empty()
    return _installed[0](release, window=window, refs=refs, settings=settings)
