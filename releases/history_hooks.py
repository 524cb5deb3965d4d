"""Where the risk policy gets a release's history (`risk.history.History`), without
importing sources.

The history is computed from the detail tables of the sources app (commits, test cases, metric
samples), and releases may not import sources; `SourcesConfig.ready` installs its reader here
(sources/apps.py). Without the sources app every release's history is empty, and the policy
reads the summary alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from risk.history import History

if TYPE_CHECKING:
    from releases.models import Release


class HistoryReader(Protocol):
    def __call__(self, release: Release, *, window: int) -> History: ...


_installed: list[HistoryReader] = []


def install(reader: HistoryReader) -> None:
    _installed[:] = [reader]


def history_of(release: Release, *, window: int) -> History:
    """The release's history over its service's last `window` releases; empty without a
    reader."""
    return _installed[0](release, window=window) if _installed else History.empty()
