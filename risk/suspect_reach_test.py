"""Each shape of issue 38 on the ranking: the culprit first, and the evidence says why."""

from __future__ import annotations

from dataclasses import dataclass

from risk.scope_evidence import call_reach
from risk.suspect_reach import called_names, calls_in_test, calls_near, import_distances
from risk.suspects import (
    ON_PATH,
    UNDER_TEST,
    Failure,
    RangeCommit,
    file_of_test_case,
    is_test_file,
    python_scopes,
    rank_suspects,
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


def _c(sha: str, subject: str, *files: F) -> RangeCommit:
    return RangeCommit(sha * 8, subject, "Mira Holt", files)


# tomli, as the client sends its graph: names as written and repository paths marked "/".
_GRAPH = {
    "tests/test_misc.py": ["/tests/__init__.py"],
    "tests/__init__.py": ["/src/tomli/__init__.py"],
    "src/tomli/__init__.py": ["/src/tomli/_parser.py", "/src/tomli/_re.py"],
    "src/tomli/_parser.py": ["/src/tomli/_re.py"],
}
_PATHS = [*_GRAPH, "src/tomli/_re.py", "tests/test_data.py"]
_PARSER = (
    "def loads(s):\n"  # 1
    "    src = s.replace('\\r\\n', '\\n')\n"
    "    pos = 0\n"
    "    out = parse_value(src, pos)\n"
    "    return out\n"  # 5
    "\n"
    "def parse_value(src, pos):\n"
    "    return skip_chars(src, pos)\n"
    "\n"
    "def skip_chars(src, pos):\n"  # 10
    "    return src[pos:]\n"
    "\n"
    "def dumps(obj):\n"  # 13
    "    return str(obj)\n"
)


def test_import_distances_follow_the_graph() -> None:
    found = import_distances(["tests/test_misc.py"], _GRAPH, _PATHS)
    assert found == {
        "tests/test_misc.py": 0,
        "tests/__init__.py": 1,
        "src/tomli/__init__.py": 2,
        "src/tomli/_parser.py": 3,
        "src/tomli/_re.py": 3,
    }
    # Names as written (an older client) are still resolved, and the namesake with them.
    older = import_distances(["tests/test__re.py"], {"tests/test__re.py": ["tomli._parser"]}, [
        "src/tomli/_parser.py", "src/tomli/_re.py", "tests/test__re.py"
    ])  # fmt: skip
    assert older == {"tests/test__re.py": 0, "src/tomli/_parser.py": 1, "src/tomli/_re.py": 1}


def _tomli_failure(called: frozenset[str]) -> Failure:
    distances = import_distances(["tests/test_misc.py"], _GRAPH, _PATHS)
    return Failure(
        "tests/test_misc.py",
        (Fr("tests/test_misc.py", 12, "test_newline_escape"),),
        exercised=frozenset(p for p in distances if p != "tests/test_misc.py"),
        distances=distances,
        test_name="test_newline_escape",
        called=called,
    )


def test_through_the_tests_package_the_culprit_in_the_function_the_test_calls() -> None:
    # Newest first: a sweep over every function ("improve typing") after the one-line culprit.
    commits = [
        _c("d", "docs: changelog", F("CHANGES.md", (H(1, 0, 1, 3),))),
        _c("t", "improve typing", F("src/tomli/__init__.py", (H(1, 1, 1, 1),)),
           F("src/tomli/_parser.py", (H(1, 1, 1, 1), H(7, 1, 7, 1), H(10, 1, 10, 1)))),
        _c("b", "fix: normalise newlines", F("src/tomli/_parser.py", (H(2, 1, 2, 1),))),
    ]  # fmt: skip
    scopes = {"src/tomli/_parser.py": python_scopes(_PARSER)}
    failure = _tomli_failure(
        called_names("    def test_newline_escape():\n>       tomllib.loads('a')")
    )
    ranked = rank_suspects(failure, commits, scopes=scopes)
    assert [s.sha[0] for s in ranked] == ["b", "t"]
    assert ranked[0].tier == UNDER_TEST
    assert "its change is in `loads`, which test_newline_escape calls" in ranked[0].reason
    assert "the test reaches it in 3 import steps" in ranked[0].reason
    # Both changed `loads`; the sweep over every function is the wider change.
    assert ranked[0].reason.endswith("as its change is narrower (hunks: 1 against 4)")


def test_without_a_name_the_nearer_import_ranks_first_not_the_newer() -> None:
    commits = [
        _c("p", "refactor parser", F("src/tomli/_parser.py", (H(8, 1, 8, 1),))),
        _c("i", "re-export load", F("src/tomli/__init__.py", (H(1, 1, 1, 2),))),
    ]
    ranked = rank_suspects(_tomli_failure(frozenset()), commits)
    assert [s.sha[0] for s in ranked] == ["i", "p"]
    assert "the test reaches it in 2 import steps; first, ahead of pppppppp" in ranked[0].reason
    assert ranked[0].reason.endswith("as the test reaches it in fewer import steps (2 against 3)")


def test_a_removed_line_at_a_functions_end_points_into_that_function() -> None:
    # The culprit removed `return out` (line 5 of the old text): at the head, lines 4 and 5 of
    # the gap, the latter past `loads`' end. A newer commit changed another function.
    head = _PARSER.replace("    return out\n", "")
    commits = [
        # dumps: no function loads calls
        _c("n", "dumps: str of the object", F("src/tomli/_parser.py", (H(14, 1, 13, 1),))),
        _c("r", "tidy loads", F("src/tomli/_parser.py", (H(5, 1, 4, 0),))),
    ]
    scopes = {"src/tomli/_parser.py": python_scopes(head)}
    ranked = rank_suspects(_tomli_failure(frozenset({"loads"})), commits, scopes=scopes)
    assert ranked[0].sha[0] == "r"
    assert "its change is in `loads`" in ranked[0].reason
    # And a frame on the line after the gap runs next to the removal.
    failure = Failure(
        "tests/test_misc.py",
        (Fr("src/tomli/_parser.py", 5, "loads"), Fr("tests/test_misc.py", 12, "test_x")),
    )
    [first, *_] = rank_suspects(failure, commits)
    assert first.sha[0] == "r" and first.tier == ON_PATH
    assert "is next to lines removed by" in first.reason


def test_the_fixture_chosen_implementation_is_under_test() -> None:
    # markupsafe: the test imports the package; the conftest imports both implementations.
    graph = {
        "tests/test_escape.py": ["/src/markupsafe/__init__.py", "/tests/conftest.py"],
        "tests/conftest.py": ["/src/markupsafe/_native.py", "/src/markupsafe/_speedups.py"],
        "src/markupsafe/__init__.py": ["/src/markupsafe/_native.py"],
    }
    distances = import_distances(["tests/test_escape.py"], graph, list(graph))
    native = "def escape(s):\n    return s.replace('&', '&amp;')\n\ndef other(s):\n    return s\n"
    init = (
        "class Markup:\n    def escape(self, s):\n        return escape(s)\n"
        "    def join(self, seq):\n        return self.escape(seq)\n"
        "    def format(self, *a):\n        return self.escape(a)\n"
    )
    commits = [
        _c("m", "Markup.join takes any iterable",
           F("src/markupsafe/__init__.py", (H(5, 1, 5, 1),))),
        _c("e", "faster escape", F("src/markupsafe/_native.py", (H(2, 1, 2, 1),))),
    ]  # fmt: skip
    failure = Failure(
        "tests/test_escape.py",
        (Fr("tests/test_escape.py", 20, "test_escape"),),
        exercised=frozenset(p for p in distances if p != "tests/test_escape.py"),
        distances=distances,
        test_name="test_escape",
        called=frozenset({"escape"}),
    )
    scopes = {
        "src/markupsafe/_native.py": python_scopes(native),
        "src/markupsafe/__init__.py": python_scopes(init),
    }
    ranked = rank_suspects(failure, commits, scopes=scopes)
    assert ranked[0].sha[0] == "e"
    assert "its change is in `escape`, which test_escape calls" in ranked[0].reason


def test_test_files_by_each_runners_conventions() -> None:
    for path in ("test.js", "tests.mjs", "web/__tests__/cart.js", "web/cart.spec.ts",
                 "lib/x.test.js", "src/test/java/org/x/Util.java"):  # fmt: skip
        assert is_test_file(path), path
    for path in ("index.js", "lib/testing-utils.js", "src/main/java/org/x/Test.java"):
        assert not is_test_file(path), path


def test_jest_file_recovered_without_a_file_attribute() -> None:
    paths = ["index.js", "test/parse.test.js", "test/format.test.js"]
    frames = (
        Fr("node_modules/expect/build/index.js", 9, in_repo=False),
        Fr("index.js", 40, "parse"),
        Fr("test/parse.test.js", 12, "Object.<anonymous>"),
    )
    # jest-junit's default: classname and name are the describe block's title and the test's.
    assert file_of_test_case("parse strings", None, paths, "parse", frames) == "test/parse.test.js"
    # With suiteNameTemplate "{filepath}", the suite names the file.
    assert file_of_test_case("x y", None, paths, "test/format.test.js") == "test/format.test.js"
    assert file_of_test_case("x y", None, paths, "format") == ""


def test_what_the_test_calls() -> None:
    text = "    def test_newline_escape():\n>       assert tomllib.loads(s) == {'a': 1}\n"
    assert called_names(text) == {"test_newline_escape", "loads"}
    source = "def test_a():\n    pass\n\ndef test_b():\n    assert m.parse(x) == len(y)\n"
    assert calls_in_test(source, "test_b[1-2]") == {"parse"}
    assert calls_in_test("def (:", "test_b") == frozenset()


def test_calls_near_the_failing_line_of_a_test_file() -> None:
    sent = ["/index.js", "call:Command@3", "call:option@3", "call:humanize@40", "call:bad@x"]
    assert calls_near(sent, [5]) == {"Command", "option"}
    assert calls_near(sent, []) == {"Command", "option", "humanize"}  # no line: the whole file


def test_a_name_in_many_functions_links_no_call() -> None:
    # `parse` is in every function's text (a docstring's example): no call chain through it.
    source = (
        "".join(f"def f{n}(v):\n    '''parse(v)'''\n    return v\n\n" for n in range(6))
        + "def parse(v):\n    return _cmp(v)\n\ndef _cmp(v):\n    return v\n"
    )
    scopes = python_scopes(source)
    reached = call_reach(scopes, frozenset({"f0"}))
    assert [scopes[i].name for i in reached] == ["f0"]
    assert {scopes[i].name for i in call_reach(scopes, frozenset({"parse"}))} == {"parse", "_cmp"}


def test_a_parametrized_id_names_functions() -> None:
    from risk.suspect_reach import parameter_names

    defined = {"cmd_bump", "cmd_check", "patch_it"}
    assert parameter_names("test_cli[cmd_bump-args2-expectation2]", defined) == {"cmd_bump"}
    assert parameter_names("test_next[1.3.2-patch-1.3.3]", defined) == frozenset()
    assert parameter_names("test_cli", defined) == frozenset()


def test_a_doctest_page_exercises_the_modules_defining_what_it_calls() -> None:
    from risk.suspect_reach import defining_modules

    scopes = {
        "units/length.py": python_scopes("def to_metres(x):\n    return x\n"),
        "units/area.py": python_scopes("def square(x):\n    return x\n"),
        "tests/test_length.py": python_scopes("def to_metres(x):\n    return x\n"),
    }
    assert defining_modules(frozenset({"to_metres", "parse"}), scopes) == {"units/length.py": 1}
