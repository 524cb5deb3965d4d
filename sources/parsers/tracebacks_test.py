"""The traceback reader on real failure texts: pytest's long, short and native tracebacks (written
by pytest 9 on a small project of our own, in testdata/tracebacks/), and the unittest, pytest,
Surefire/TestNG and jest texts of the shared corpus' real JUnit reports."""

from __future__ import annotations

from pathlib import Path

import defusedxml.ElementTree as ElementTree
import pytest

from sources.parsers.tracebacks import Frame, RepoPaths, read_frames

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parents[1]
# Beside the clone in CI and in the main checkout; two levels up from a worktree under wt/.
_CORPUS = next(
    (c for c in (_ROOT.parent / "shared/corpus", _ROOT.parents[1] / "shared/corpus") if c.is_dir()),
    _ROOT.parent / "shared/corpus",
)
_TINY_REPO = ["src/pkg/__init__.py", "src/pkg/calc.py", "tests/test_calc.py", "README.md"]
_EXPECTED_TINY = [
    Frame("tests/test_calc.py", 7, "test_parse_empty", True),
    Frame("src/pkg/calc.py", 2, "parse", True),
    Frame("src/pkg/calc.py", 7, "helper", True),
]


def _failures(style: str) -> list[str]:
    text = (_HERE / "testdata/tracebacks" / f"pytest-{style}.txt").read_text()
    return text.split("\n" + "#" * 20 + " next failure\n")


def _corpus_failures(name: str) -> list[str]:
    tree = ElementTree.parse(_CORPUS / "junit/files" / name)
    return [e.text or "" for e in tree.iter() if e.tag in ("failure", "error")]


@pytest.mark.parametrize("style", ["long", "short", "native"])
def test_pytest_styles_give_the_same_frames(style: str) -> None:
    frames = [f for f in read_frames(_failures(style)[0], _TINY_REPO) if f.in_repo]
    assert frames == _EXPECTED_TINY


def test_native_keeps_pytests_own_frames_outside_the_repository() -> None:
    frames = read_frames(_failures("native")[0], _TINY_REPO)
    outside = [f for f in frames if not f.in_repo]
    assert {f.path.split("/")[0] for f in outside} == {"_pytest", "pluggy"}
    assert frames[-3:] == _EXPECTED_TINY


@pytest.mark.parametrize("style", ["long", "short"])
@pytest.mark.parametrize(
    ("index", "expected"),
    [
        (1, Frame("tests/test_calc.py", 11, "test_scale", True)),
        # "DID NOT RAISE": the test's own frame is all the text names.
        (2, Frame("tests/test_calc.py", 15, "test_raises", True)),
    ],
)
def test_an_assertion_has_only_the_tests_frame(style: str, index: int, expected: Frame) -> None:
    assert read_frames(_failures(style)[index], _TINY_REPO) == [expected]


def test_ci_runner_and_venv_prefixes_are_dropped() -> None:
    text = (
        'File "/home/runner/work/proj/proj/src/pkg/calc.py", line 7, in helper\n'
        'File "/home/runner/work/proj/proj/.venv/lib/python3.12/site-packages/pkg/calc.py",'
        " line 2, in parse\n"
        'File "D:\\a\\proj\\proj\\tests\\test_calc.py", line 9, in test_x\n'
        'File "/opt/py/lib/python3.12/site-packages/attr/_make.py", line 3, in f\n'
    )
    assert read_frames(text, _TINY_REPO) == [
        Frame("src/pkg/calc.py", 7, "helper", True),
        Frame("src/pkg/calc.py", 2, "parse", True),
        Frame("tests/test_calc.py", 9, "test_x", True),
        Frame("attr/_make.py", 3, "f", False),
    ]
    assert read_frames(text)[0] == Frame("src/pkg/calc.py", 7, "helper", True)


def test_a_name_held_twice_with_nothing_to_tell_them_apart_is_not_guessed() -> None:
    repo = RepoPaths(["a/util.py", "b/util.py"])
    assert repo.match("/x/y/util.py") is None
    assert repo.match("/x/b/util.py") == "b/util.py"


def test_a_librarys_file_of_the_same_name_is_not_the_repositorys() -> None:
    repo = RepoPaths(["src/myproj/utils.py", "setup.py"])
    assert repo.match("/venv/lib/python3.12/site-packages/requests/utils.py") is None
    assert repo.match("/home/runner/work/p/p/src/myproj/utils.py") == "src/myproj/utils.py"
    assert repo.match("utils.py") == "src/myproj/utils.py"
    assert repo.match("/home/runner/work/p/p/setup.py") == "setup.py"


def test_corpus_pytest_report() -> None:
    failures = _corpus_failures("dorny__python-xunit-pytest.xml")
    assert [read_frames(t, ["tests/test_lib.py"]) for t in failures] == [
        [Frame("tests/test_lib.py", 25, "test_always_fail", True)],
        [Frame("tests/test_lib.py", 32, "test_error", True)],
    ]


def test_corpus_unittest_report() -> None:
    failures = _corpus_failures("dorny__python-xunit-unittest.xml")
    assert [read_frames(t, ["tests/test_lib.py", "lib/x.py"]) for t in failures] == [
        [Frame("tests/test_lib.py", 24, "test_always_fail", True)],
        [Frame("tests/test_lib.py", 31, "test_error", True)],
    ]


def test_corpus_surefire_testng_trace_maps_the_class_to_its_source_by_package() -> None:
    (text,) = _corpus_failures("dorny__external__java__pulsar-test-report.xml")
    repo = [
        "pulsar-common/src/main/java/org/apache/pulsar/Version.java",
        "pulsar-common/src/test/java/org/apache/pulsar/AddMissingPatchVersionTest.java",
        "other/src/test/java/org/other/AddMissingPatchVersionTest.java",
    ]
    in_repo = [f for f in read_frames(text, repo) if f.in_repo]
    assert in_repo == [
        Frame(
            "pulsar-common/src/test/java/org/apache/pulsar/AddMissingPatchVersionTest.java",
            29,
            "AddMissingPatchVersionTest.testVersionStrings",
            True,
        )
    ]
    without_list = [f for f in read_frames(text) if f.in_repo]
    assert [f.path for f in without_list] == ["org/apache/pulsar/AddMissingPatchVersionTest.java"]


def test_corpus_jest_trace_on_windows() -> None:
    failures = _corpus_failures("dorny__jest-junit.xml")
    repo = ["lib/main.js", "__tests__/main.test.js", "package.json"]
    frames = [[f for f in read_frames(t, repo) if f.in_repo] for t in failures]
    assert frames[1] == [
        Frame("lib/main.js", 2, "Object.throwError", True),
        Frame("__tests__/main.test.js", 14, "", True),
    ]
    assert all(f.path != "node_modules" for fs in frames for f in fs)
    assert frames[0] == [Frame("__tests__/main.test.js", 10, "", True)]


def test_corpus_jest_trace_keeps_node_modules_and_the_runtime_out() -> None:
    failures = _corpus_failures("dorny__external__jest__jest-test-results.xml")
    repo = ["e2e/__tests__/onlyChanged.test.ts", "e2e/__tests__/jestChangedFiles.test.ts"]
    frames = [f for t in failures for f in read_frames(t, repo) if f.in_repo]
    assert {f.path for f in frames} <= set(repo)
    assert Frame("e2e/__tests__/onlyChanged.test.ts", 360, "Object.toMatch", True) in frames


def test_jest_on_a_linux_runner() -> None:
    text = (
        "Error: expect(received).toBe(expected)\n"
        "    at Object.<anonymous> (/home/runner/work/r/r/src/x.test.ts:12:5)\n"
        "    at add (/home/runner/work/r/r/src/x.ts:3:9)\n"
        "    at processTicksAndRejections (node:internal/process/task_queues:95:5)\n"
    )
    assert read_frames(text, ["src/x.ts", "src/x.test.ts"]) == [
        Frame("src/x.test.ts", 12, "", True),
        Frame("src/x.ts", 3, "add", True),
    ]


def test_an_es_modules_frames_are_urls() -> None:
    # node:test's junit reporter on a package with "type": "module" (classnames), as node 20
    # writes it: every frame a file:// URL, which read as no frame at all before.
    text = (
        "  cause: AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:\n"
        "      at TestContext.<anonymous> (file:///ci/classnames/tests/dedupe.js:18:10)\n"
        "      at appendString (file:///ci/classnames/dedupe.js:41:3)\n"
        "      at Test.runInAsyncScope (node:async_hooks:206:9)\n"
    )
    assert read_frames(text, ["dedupe.js", "tests/dedupe.js"]) == [
        Frame("tests/dedupe.js", 18, "TestContext.<anonymous>", True),
        Frame("dedupe.js", 41, "appendString", True),
    ]


def test_text_with_no_frames() -> None:
    assert read_frames("Expected value did not match.") == []
    assert read_frames("") == []


def test_a_tap_report_in_junit() -> None:
    # tap-junit: tape's `at:` line, then the stack written on one line.
    text = (
        "operator: deepEqual\n"
        "at: Test.<anonymous> (/w/mm/test/num.js:15:4)\n"
        "stack: Error: should be deeply equivalent     at Test.assert [as _assert] "
        "(/w/mm/node_modules/tape/lib/test.js:548:48)     at Test.<anonymous> "
        "(/w/mm/test/num.js:15:4)     at Test.run (/w/mm/node_modules/tape/lib/test.js:151:28)"
    )
    frames = read_frames(text, ["test/num.js", "index.js"])
    assert [(f.path, f.line) for f in frames if f.in_repo] == [("test/num.js", 15)] * 2
    assert len(frames) == 4
