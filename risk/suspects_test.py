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
    file_of_test_case,
    lines_at_head,
    message_names,
    python_imports,
    python_scopes,
    rank_suspects,
    verdict_sentence,
    with_blame,
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


def test_blame_replaces_carried_lines_and_keeps_deletions() -> None:
    carried = lines_at_head(
        [_c("b", F("m.py", (H(3, 1, 2, 0),))), _c("a", F("m.py", (H(9, 1, 9, 1),)))]
    )
    blamed = [ChangedRange("m.py", 12, 12, "a")]
    assert with_blame(carried, blamed)["m.py"] == [
        ChangedRange("m.py", 12, 12, "a"),
        ChangedRange("m.py", 2, 3, "b", True),
    ]


_MODULE = """class IntRange:
    def _clamp(self, bound, dir):
        return bound + dir

    def convert(self, value):
        return self._clamp(value, 1)


class FloatRange:
    def convert(self, value):
        return float(value)


class Choice:
    def convert(self, value):
        return value
"""


def test_message_names_and_scopes() -> None:
    names = message_names(
        "AssertionError: assert 6 == 4\n +  where 6 = convert('5', None, None)\n"
        " +    where convert = <IntRange x<5 clamped>.convert"
    )
    assert names == {"convert", "IntRange", "clamped"}
    scopes = python_scopes(_MODULE)
    assert [(s.start, s.end) for s in scopes] == [(2, 3), (5, 6), (10, 11), (15, 16)]
    assert "IntRange" in scopes[0].words and "IntRange" not in scopes[2].words
    assert python_scopes("def (:") == []


def test_the_rarer_name_the_failure_gives_ranks_first_under_test() -> None:
    # Newest first: the FloatRange.convert change is newer, but `convert` is in every class and
    # `IntRange` only around _clamp.
    commits = [
        _c("float", F("src/types.py", (H(11, 1, 11, 1),))),
        _c("clamp", F("src/types.py", (H(3, 1, 3, 1),))),
    ]
    failure = Failure(
        "tests/test_types.py",
        (Fr("tests/test_types.py", 35, "test_range"),),
        frozenset({"src/types.py"}),
        frozenset({"src/types.py"}),
        frozenset({"convert", "IntRange"}),
    )
    scopes = {"src/types.py": python_scopes(_MODULE)}
    assert [s.sha for s in rank_suspects(failure, commits, scopes=scopes)] == ["clamp", "float"]
    assert [s.sha for s in rank_suspects(failure, commits)] == ["float", "clamp"]


_TEST_REPO = [
    "tests/test_itsdangerous/test_timed.py",
    "src/itsdangerous/timed.py",
    "pulsar-common/src/test/java/org/apache/pulsar/AddMissingPatchVersionTest.java",
    "__tests__/main.test.js",
]


@pytest.mark.parametrize(
    ("classname", "file", "expected"),
    [
        (
            "tests.test_itsdangerous.test_timed.TestTimedSerializer",
            None,
            "tests/test_itsdangerous/test_timed.py",
        ),
        ("test_itsdangerous.test_timed", None, "tests/test_itsdangerous/test_timed.py"),
        (
            "org.apache.pulsar.AddMissingPatchVersionTest$Inner",
            None,
            "pulsar-common/src/test/java/org/apache/pulsar/AddMissingPatchVersionTest.java",
        ),
        ("Main tests", "__tests__/main.test.js", "__tests__/main.test.js"),
        ("Main tests", "C:\\w\\r\\__tests__\\main.test.js", "__tests__/main.test.js"),
        ("nowhere.TestX", None, ""),
    ],
)
def test_file_of_test_case(classname: str, file: str | None, expected: str) -> None:
    assert file_of_test_case(classname, file, _TEST_REPO) == expected


def test_the_runners_frames_and_paths_name_nothing() -> None:
    from risk.suspects import message_names

    text = (
        "expected: { hex: 3735928559 }\n"
        "at: Test.<anonymous> (/w/minimist/test/num.js:15:4)\n"
        "stack: Error: should be deeply equivalent     at Test.assert [as _assert] "
        "(/w/node_modules/tape/lib/test.js:548:48)     at Immediate.next [as _onImmediate] "
        "(/w/node_modules/tape/lib/results.js:175:7)     at appendClass (/w/dedupe.js:4:5)"
    )
    names = message_names(text)
    assert "appendClass" in names  # the project's own frame
    assert not names & {"next", "Immediate", "_onImmediate", "tapeDeepEqual", "minimist", "num"}
