"""The Conventional Commits classifier, as a table."""

from __future__ import annotations

import pytest

from detective_client.conventional import Conventional, classify


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("feat: add a page", Conventional("feat", None, False)),
        ("fix(api): handle a 404", Conventional("fix", "api", False)),
        ("feat(api)!: drop v1", Conventional("feat", "api", True)),
        ("refactor!: rewrite the loop", Conventional("refactor", None, True)),
        ("Feat(UI): capitals in the type", Conventional("feat", "UI", False)),
        ("chore(deps-dev): bump ruff", Conventional("chore", "deps-dev", False)),
        ("fix: a bug\n\nBREAKING CHANGE: the config moved", Conventional("fix", None, True)),
        ("fix: a bug\n\nBREAKING-CHANGE: the config moved", Conventional("fix", None, True)),
        (
            "feat(db): new column\n\nSome body.\n\nRefs: #12\nBREAKING CHANGE: migrate first",
            Conventional("feat", "db", True),
        ),
        # Not breaking: the words are in the subject, or not a footer token.
        ("docs: explain BREAKING CHANGE: footers", Conventional("docs", None, False)),
        ("fix: x\n\nthis is a breaking change: lower case", Conventional("fix", None, False)),
        # Not conventional: no type, no scope.
        ("Merge branch 'feature'", Conventional(None, None, False)),
        ("Update README.md", Conventional(None, None, False)),
        ("feat:no space after the colon", Conventional(None, None, False)),
        ("feat(): empty scope is no scope", Conventional("feat", None, False)),
        ("feat(a(b)): nested parentheses", Conventional(None, None, False)),
        ("", Conventional(None, None, False)),
        ("WIP\n\nBREAKING CHANGE: still breaking", Conventional(None, None, True)),
    ],
)
def test_classify(message: str, expected: Conventional) -> None:
    assert classify(message) == expected
