"""The earlier commits of a service, carried from release to release by a reader that walks its
releases oldest first (the backtest), so that each release's history does not read them all
again (issue 39, item 3: the backtest re-read every earlier commit for each tag).

`sources.history` reads, for a release's authors, every commit they made in the service's
earlier releases (what they touched before, how many commits). Given an `EarlierCommits` that
holds exactly the earlier releases' commits, it takes them from here instead of the database;
the figures are the same (`sources/earlier_commits_test.py` compares them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from sources.models import Commit

# (commit id, author name, author email, a file's path or None for a commit without files)
Row = tuple[int, str, str, str | None]


class EarlierCommits:
    """The commits of the releases added so far, by author email and by author name."""

    def __init__(self) -> None:
        self._by_email: dict[str, list[Row]] = defaultdict(list)
        self._by_name: dict[str, list[Row]] = defaultdict(list)
        self.releases: set[int] = set()

    def add_release(self, release_id: int) -> None:
        """Carry a release's commits (one query), once it was judged."""
        rows = Commit.objects.filter(release_id=release_id).values_list(
            "id", "author_name", "author_email", "files__path"
        )
        self.add(release_id, rows)

    def add(self, release_id: int, rows: Iterable[Row]) -> None:
        self.releases.add(release_id)
        for row in rows:
            _pk, name, email, _path = row
            if email:
                self._by_email[email].append(row)
            self._by_name[name].append(row)

    def rows_for(self, emails: Iterable[str], names: Iterable[str]) -> list[Row]:
        """The carried rows whose author's email is one of `emails` or name one of `names`
        (the history's own filter); a row may come twice, once by each."""
        found: list[Row] = []
        for email in emails:
            found += self._by_email.get(email, ())
        for name in names:
            found += self._by_name.get(name, ())
        return found
