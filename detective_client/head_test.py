"""The head's facts and the hunks on commit records, read from git repositories built here."""

from __future__ import annotations

import gc
import subprocess
from pathlib import Path

import pytest

from detective_client import head as head_module
from detective_client.git import read_range
from detective_client.head import (
    calls_in_file,
    imported_names,
    looks_like_test,
    python_scopes,
    read_head,
    with_hunks,
)
from detective_client.hunks import read_hunks


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "config", "user.name", "Mira Holt")
    _git(tmp_path, "config", "user.email", "mira@example.org")
    (tmp_path / "shop").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "shop/cart.py").write_text("def total(items):\n    return sum(items)\n")
    (tmp_path / "shop/old.py").write_text("".join(f"x{n} = {n}\n" for n in range(10)))
    (tmp_path / "tests/test_cart.py").write_text("from shop.cart import total\n")
    (tmp_path / "tests/test_other.py").write_text("import shop\n")
    _commit(tmp_path, "start")
    _git(tmp_path, "tag", "v1")
    return tmp_path


def test_commit_records_carry_their_files_hunks(repo: Path) -> None:
    (repo / "shop/cart.py").write_text("def total(items):\n    return sum(items, 0)\n")
    _git(repo, "mv", "shop/old.py", "shop/renamed.py")
    (repo / "logo.png").write_bytes(bytes(range(256)))
    (repo / "uv.lock").write_text("lock\n")
    sha = _commit(repo, "change")
    [record] = with_hunks(read_range(repo, "v1..HEAD"), read_hunks(repo, "v1..HEAD"))
    assert record.sha == sha
    by_path = {f.path: f.hunks for f in record.files}
    assert by_path == {
        "shop/cart.py": ((2, 1, 2, 1),),
        "shop/renamed.py": (),  # a pure rename: read, no line changed
        "logo.png": None,  # binary
        "uv.lock": None,  # a lock file's hunks are never kept
    }
    sent = {f["path"]: f.get("hunks") for f in record.to_json()["files"]}
    assert sent["shop/cart.py"] == [[2, 1, 2, 1]] and sent["logo.png"] is None


def test_a_commit_past_the_hunk_bound_keeps_no_hunks(repo: Path) -> None:
    (repo / "shop/cart.py").write_text("def total(items):\n    return 0\n")
    _commit(repo, "older")
    (repo / "shop/cart.py").write_text("def total(items):\n    return 1\n")
    _commit(repo, "newer")
    hunks = read_hunks(repo, "v1..HEAD", limit=1)
    records = with_hunks(read_range(repo, "v1..HEAD"), hunks)
    assert [r.files[0].hunks for r in records] == [((2, 1, 2, 1),), None]
    assert hunks.truncated


def test_read_head_sends_imports_blame_and_functions(repo: Path) -> None:
    (repo / "shop/cart.py").write_text(
        "class Cart:\n    def total(self, items):\n        return sum(items, 0)\n"
    )
    sha = _commit(repo, "feat: a cart class")
    head = read_head(repo, "v1..HEAD", read_hunks(repo, "v1..HEAD"))
    assert head.sha == sha
    assert head.tests == {
        # The graph's edge, a repository path, then the names as written.
        "tests/test_cart.py": ("/shop/cart.py", "shop.cart", "shop.cart.total"),
        "tests/test_other.py": ("shop",),  # `shop` is no package: nothing to follow
    }
    assert head.blame == {"shop/cart.py": ((1, 3, sha),)}
    [(start, end, words)] = head.scopes["shop/cart.py"]
    assert (start, end) == (2, 3) and {"Cart", "total", "self", "items"} <= set(words)
    assert words[0] == "def:total"  # its own name, marked
    assert not head.truncated
    # Through JSON and back, as the server reads it.
    assert type(head).from_json(head.to_json()) == head


def test_prose_pictures_and_dotfiles_are_not_blamed(repo: Path) -> None:
    (repo / "shop/cart.py").write_text("def total(items):\n    return sum(items, 0)\n")
    (repo / "docs").mkdir()
    (repo / "docs/cart.md").write_text("# The cart\n")
    (repo / "README").write_text("Shop\n")
    (repo / ".gitignore").write_text("*.pyc\n")
    (repo / "shop/templates").mkdir()
    (repo / "shop/templates/cart.html").write_text("<p>{{ total }}</p>\n")
    sha = _commit(repo, "feat: docs and a template")
    head = read_head(repo, "v1..HEAD", read_hunks(repo, "v1..HEAD"))
    assert gc.isenabled()  # paused while the trees are read, running again after
    # A template can be a frame's file; Markdown, a README and .gitignore never are.
    assert set(head.blame) == {"shop/cart.py", "shop/templates/cart.html"}
    assert head.blame["shop/templates/cart.html"] == ((1, 1, sha),)
    assert not head_module.blame_worth("docs/logo.SVG")
    assert not head_module.blame_worth("config/settings.toml")
    assert head_module.blame_worth("scripts/release.sh")


def test_read_head_is_bounded_and_the_changed_test_files_come_first(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "tests/test_other.py").write_text("import shop.cart\n")
    _commit(repo, "test: the other test")
    monkeypatch.setattr(head_module, "MAX_TEST_FILES", 1)
    head = read_head(repo, "v1..HEAD", read_hunks(repo, "v1..HEAD"))
    assert list(head.tests) == ["tests/test_other.py"]
    assert head.truncated


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_cart.py", True),
        ("shop/cart_test.py", True),
        ("src/test/java/org/x/FooTest.java", True),
        ("web/x.spec.ts", True),
        ("shop/cart.py", False),
        ("tests/data/report.xml", False),  # a test's data, no source
    ],
)
def test_looks_like_test(path: str, expected: bool) -> None:
    assert looks_like_test(path) is expected


def test_imported_names_as_written() -> None:
    assert imported_names("t/test_a.py", "from a.b import c\nimport d\nfrom . import e\n") == [
        "a.b",
        "a.b.c",
        "d",
    ]
    assert imported_names("t/test_a.py", "def (:") == []
    assert imported_names("T.java", "import org.x.Bar;\nimport static org.y.Z.*;\n") == [
        "org.x.Bar",
        "org.y.Z",
    ]
    assert imported_names("x.test.ts", "import { a } from './a';\nrequire('../b.js')\n") == [
        "./a",
        "../b.js",
    ]


def test_python_scopes_of_source_that_does_not_parse_are_none() -> None:
    assert python_scopes("def (:") == []
    assert python_scopes("def f():\n    return g()\n") == [(1, 2, ("def:f", "return"))]


def test_read_head_follows_a_root_test_js_into_the_package_and_reads_its_functions(
    tmp_path: Path,
) -> None:
    # debug/ms-shaped: a root test.js requiring the package folder; package.json's main names
    # index.js, which requires lib/.
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "config", "user.name", "Mira Holt")
    _git(tmp_path, "config", "user.email", "mira@example.org")
    (tmp_path / "lib").mkdir()
    (tmp_path / "package.json").write_text('{"name": "tiny", "main": "index.js"}\n')
    (tmp_path / "index.js").write_text("module.exports = require('./lib/parse');\n")
    (tmp_path / "lib/parse.js").write_text(
        "exports.parse = function (s) {\n  return s.trim();\n};\n"
    )
    (tmp_path / "test.js").write_text("const { parse } = require('./');\n")
    _commit(tmp_path, "start")
    _git(tmp_path, "tag", "v1")
    (tmp_path / "lib/parse.js").write_text(
        "exports.parse = function (s) {\n  return s.trimStart();\n};\n"
    )
    _commit(tmp_path, "parse: keep trailing space")
    head = read_head(tmp_path, "v1..HEAD", read_hunks(tmp_path, "v1..HEAD"))
    assert head.tests["test.js"] == ("/index.js",)  # `./` alone: no name as written
    assert head.tests["index.js"] == ("/lib/parse.js",)
    [(start, end, words)] = head.scopes["lib/parse.js"]
    assert (start, end) == (1, 3) and words[0] == "def:parse" and "trimStart" in words


def test_test_calls_with_their_lines() -> None:
    source = (
        "const d = require('./');\n\ntest('x', () => {\n"
        "  expect(d.humanize(1500)).toBe('2s');\n});\nfunction helper(x) {}\n"
    )
    assert calls_in_file(source) == ["call:humanize@4"]


def test_a_test_file_of_megabytes_is_not_read_for_imports(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(head_module, "MAX_SOURCE_CHARS", 30)
    (repo / "tests/test_other.py").write_text("import shop.cart\n# " + "x" * 40 + "\n")
    _commit(repo, "test: a big one")
    head = read_head(repo, "v1..HEAD", read_hunks(repo, "v1..HEAD"))
    assert "tests/test_other.py" not in head.tests and "tests/test_cart.py" in head.tests


def test_reached_files_the_range_left_alone_send_their_calls_only(repo: Path) -> None:
    # The test calls `cmd_bump` in cli.py (unchanged), whose table names `bump_minor` in
    # version.py (changed): cli.py's functions travel with the words that name a function.
    (repo / "shop/version.py").write_text(
        "def bump_minor(v):\n    return v + 1\n\n\ndef unused(v):\n    return v\n"
    )
    (repo / "shop/cli.py").write_text(
        "from shop.version import bump_minor\n\n\n"
        "def cmd_bump(args):\n    table = {'minor': 'bump_minor'}\n    return table[args]\n"
    )
    (repo / "tests/test_cli.py").write_text("from shop.cli import cmd_bump\n")
    _commit(repo, "cli")
    _git(repo, "tag", "v1.1")
    (repo / "shop/version.py").write_text(
        "def bump_minor(v):\n    return v + 2\n\n\ndef unused(v):\n    return v\n"
    )
    _commit(repo, "bump by two")
    head = read_head(repo, "v1.1..HEAD", read_hunks(repo, "v1.1..HEAD"))
    assert head.scopes["shop/cli.py"] == ((4, 6, ("def:cmd_bump", "bump_minor", "cmd_bump")),)
    assert head.scopes["shop/cart.py"] == ((1, 2, ("def:total", "total")),)  # no `items`
    assert "return" in head.scopes["shop/version.py"][0][2]  # a changed file: all its words
    assert "shop/old.py" not in head.scopes  # no test reaches it
