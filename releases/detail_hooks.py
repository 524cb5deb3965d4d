"""The release page's detail sections (test cases, commits, metric samples), which another app
stores and reads.

Why a hook, not an import: the release page is releases', the detail it shows is sources', and
sources stands above releases (its tables point at Release).

The sources app keeps a release's detail as it came from git, JUnit XML and metrics. releases
may not import sources, so sources registers its reader here when it is ready
(sources/apps.py); the release page asks it for the sections of one release and a query string
(the tab, the filters, the page), and shows what it answers with `releases/_sources.html`.
"""

from __future__ import annotations

from typing import Any, Protocol

from django.http import QueryDict

from releases.models import Release


class SectionsReader(Protocol):
    def __call__(self, release: Release, query: QueryDict) -> Any: ...


_readers: list[SectionsReader] = []


def register(reader: SectionsReader) -> None:
    if reader not in _readers:
        _readers.append(reader)


def sections(release: Release, query: QueryDict) -> Any:
    """The first registered reader's sections of this release; None without a reader."""
    for reader in _readers:
        return reader(release, query)
    return None
