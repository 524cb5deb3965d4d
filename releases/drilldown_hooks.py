"""What a release's drill-downs have to show, said in its summary ("2 failed tests: details
available"), so that a model knows where drilling down can tell it more.

The detail (tests, commits, metric samples) is the sources app's, which releases may not
import: sources registers its reader here when it is ready (sources/apps.py). Without one, a
summary says nothing of drill-downs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from releases.models import Release


class AvailableDetail(Protocol):
    def __call__(self, release: Release) -> dict[str, str]: ...


_readers: list[AvailableDetail] = []


def register(reader: AvailableDetail) -> None:
    if reader not in _readers:
        _readers.append(reader)


def available(release: Release) -> dict[str, str]:
    """Per drill-down (tests, changes, metrics) with something to show, a line saying what."""
    found: dict[str, str] = {}
    for reader in _readers:
        found.update(reader(release))
    return found
