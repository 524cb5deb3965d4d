from __future__ import annotations

from dataclasses import dataclass

import pytest

from risk.suspects import (
    NO_SUSPECT,
    ON_PATH,
    TEST_FILE,
    UNDER_TEST,
    ChangedRange,
    Failure,
    RangeCommit,
    exercised_paths,
    lines_at_head,
    python_imports,
    rank_suspects,
    verdict_sentence,
)


@dataclass(frozen=True)
class H:
    old_start: int
    old_count: int
    new_start: int
    new_count: int


@dataclass(frozen=True)
class F:
    path: str
    hunks: tuple[H, ...]
    old_path: str | None = None


@dataclass(frozen=True)
class Fr:
    path: str
    line: int
    function: str = ""
    in_repo: bool = True


def _c(sha: str, *files: F, automated: bool = False) -> RangeCommit:
    return RangeCommit(sha, f"subject {sha}", "Mira Holt", files, automated)


@pytest.mark.parametrize(
    ("later", "expected"),
    [
        # An insertion of 3 lines above shifts the range down.
        ((H(2, 0, 3, 3),), [(13, 17)]),
        # An insertion below leaves it.
        ((H(30, 0, 31, 2),), [(10, 14)]),
        # Two lines removed above shift it up.
        ((H(1, 2, 0, 0),), [(8, 12)]),
        # Its middle line rewritten by the later commit: two pieces stay, the middle is the later's.
        ((H(12, 1, 12, 1),), [(10, 11), (13, 14)]),
        # An insertion inside it splits it.
        ((H(11, 0, 12, 2),), [(10, 11), (14, 16)]),
        # All of it rewritten.
        ((H(9, 7, 9, 1),), []),
    ],
)
def test_changed_lines_are_carried_to_the_heads_numbering(
    later: tuple[H, ...], expected: list[tuple[int, int]]
) -> None:
    commits = [_c("b", F("m.py", later)), _c("a", F("m.py", (H(9, 0, 10, 5),)))]
    owned = lines_at_head(commits)["m.py"]
    assert [(r.start, r.end) for r in owned if r.sha == "a"] == expected


def test_a_rename_carries_the_lines_to_the_new_path() -> None:
    commits = [
        _c("b", F("new.py", (H(1, 0, 2, 1),), old_path="old.py")),
        _c("a", F("old.py", (H(4, 1, 4, 1),))),
    ]
    owned = lines_at_head(commits)
    assert "old.py" not in owned
    assert ChangedRange("new.py", 5, 5, "a") in owned["new.py"]


def test_a_deletion_is_the_gap_it_left() -> None:
    owned = lines_at_head([_c("a", F("m.py", (H(7, 2, 6, 0),)))])
    assert owned["m.py"] == [ChangedRange("m.py", 6, 7, "a", True)]


@pytest.mark.parametrize(
    ("test_path", "source", "repo", "expected"),
    [
        (
            "tests/test_itsdangerous/test_timed.py",
            "from itsdangerous.exc import BadTimeSignature\nimport itsdangerous.timed as t\n",
            [
                "src/itsdangerous/timed.py",
                "src/itsdangerous/exc.py",
                "src/itsdangerous/__init__.py",
                "src/itsdangerous/url_safe.py",
                "tests/test_itsdangerous/test_timed.py",
            ],
            {"src/itsdangerous/timed.py", "src/itsdangerous/exc.py"},
        ),
        (
            "src/test/java/org/x/FooTest.java",
            "package org.x;\nimport org.x.util.Bar;\nimport static org.junit.Assert.*;\n",
            [
                "src/main/java/org/x/Foo.java",
                "src/main/java/org/y/Foo.java",
                "src/main/java/org/x/util/Bar.java",
                "src/main/java/org/x/Baz.java",
            ],
            {"src/main/java/org/x/Foo.java", "src/main/java/org/x/util/Bar.java"},
        ),
        (
            "src/x.test.ts",
            "import { add } from './lib/add';\nconst y = require('../y.js');\n",
            ["src/x.ts", "src/lib/add.ts", "y.js", "src/other.ts"],
            {"src/x.ts", "src/lib/add.ts", "y.js"},
        ),
        ("tests/test_nothing.py", None, ["src/a.py"], set()),
    ],
)
def test_exercised_paths(
    test_path: str, source: str | None, repo: list[str], expected: set[str]
) -> None:
    assert exercised_paths(test_path, source, repo) == expected


def test_python_imports_reads_from_imports_and_ignores_bad_source() -> None:
    assert python_imports("from a.b import c\nimport d\nfrom . import e\n") == [
        "a.b",
        "a.b.c",
        "d",
    ]
    assert python_imports("def (:") == []


_RANGE = [
    # Newest first, as git log gives them.
    _c("bot", F("src/m.py", (H(40, 1, 40, 1),)), automated=True),
    _c("far", F("src/m.py", (H(80, 1, 80, 1),))),
    _c("near", F("src/m.py", (H(20, 1, 20, 1),))),
    _c("exact", F("src/m.py", (H(30, 1, 30, 1),))),
    _c("test", F("tests/test_m.py", (H(5, 1, 5, 1),))),
    _c("docs", F("docs/index.md", (H(1, 1, 1, 1),))),
]


def test_frames_through_changed_lines_come_first_by_closeness() -> None:
    failure = Failure(
        "tests/test_m.py",
        (Fr("tests/test_m.py", 6, "test_x"), Fr("src/m.py", 27, "f"), Fr("src/m.py", 40, "g")),
        frozenset({"src/m.py"}),
    )
    ranked = rank_suspects(failure, _RANGE)
    assert [(s.sha, s.tier, s.distance) for s in ranked] == [
        ("bot", ON_PATH, 0),
        ("exact", ON_PATH, 3),
        ("near", ON_PATH, 7),
        ("far", UNDER_TEST, None),
        ("test", TEST_FILE, 1),
    ]
    assert "src/m.py line 40 (in g) runs through lines changed by bot" in ranked[0].reason


def test_only_the_tests_frame_falls_back_to_the_module_it_exercises() -> None:
    failure = Failure(
        "tests/test_m.py", (Fr("tests/test_m.py", 40, "test_x"),), frozenset({"src/m.py"})
    )
    ranked = rank_suspects(failure, _RANGE)
    # The bot's change is not on this failure's path, so it is no suspect.
    assert [s.sha for s in ranked] == ["far", "near", "exact", "test"]
    assert {s.tier for s in ranked[:3]} == {UNDER_TEST}


def test_code_rewritten_later_in_the_range_ranks_below_code_that_stands() -> None:
    commits = [
        _c("newer", F("src/m.py", (H(1, 0, 1, 1),))),
        _c("rewritten", F("src/m.py", (H(9, 1, 9, 1),))),
    ]
    commits.insert(0, _c("newest", F("src/m.py", (H(10, 1, 10, 1),))))
    failure = Failure("tests/test_m.py", (), frozenset({"src/m.py"}))
    assert [s.sha for s in rank_suspects(failure, commits)] == ["newest", "newer", "rewritten"]


def test_no_change_on_the_path() -> None:
    failure = Failure("tests/test_m.py", (Fr("tests/test_m.py", 50),), frozenset({"src/n.py"}))
    assert rank_suspects(failure, _RANGE[-1:]) == []
    assert verdict_sentence("test_x", []) == f"test_x: {NO_SUSPECT}"


def test_frames_outside_the_repository_are_not_suspects_paths() -> None:
    failure = Failure("tests/test_m.py", (Fr("src/m.py", 30, "f", in_repo=False),))
    assert rank_suspects(failure, _RANGE) == [rank_suspects(failure, _RANGE)[0]]
    assert rank_suspects(failure, _RANGE)[0].tier == TEST_FILE
