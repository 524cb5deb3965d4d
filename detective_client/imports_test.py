"""The import graph at the head, on the shapes of real projects' tests (built here, in memory)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pytest

from detective_client.head import looks_like_test
from detective_client.imports import import_graph


def _graph(files: Mapping[str, str], *starts: str, **bounds: int) -> dict[str, tuple[str, ...]]:
    def read(paths: Sequence[str]) -> dict[str, str]:
        return {p: files[p] for p in paths if p in files}

    edges, _ = import_graph(list(starts), list(files), read, looks_like_test, **bounds)
    return edges


def _reached(edges: Mapping[str, Sequence[str]], start: str) -> dict[str, int]:
    seen, level, depth = {start: 0}, [start], 0
    while level:
        depth += 1
        level = [t for p in level for t in edges.get(p, ()) if t not in seen]
        seen.update((t, depth) for t in level if t not in seen)
    return seen


def test_a_tests_package_reaching_the_library_through_its_init() -> None:
    # tomli: `from . import tomllib` in the tests, whose __init__ imports the package, whose
    # __init__ re-exports the parser.
    files = {
        "tests/__init__.py": "import tomli as tomllib\n",
        "tests/test_misc.py": "from . import tomllib\n\ndef test_x():\n    tomllib.loads('')\n",
        "src/tomli/__init__.py": "from ._parser import loads, load\nfrom ._re import x\n",
        "src/tomli/_parser.py": "from ._re import RE\nfrom . import _types\n",
        "src/tomli/_re.py": "import re\n",
        "src/tomli/_types.py": "",
    }
    reached = _reached(_graph(files, "tests/test_misc.py"), "tests/test_misc.py")
    assert reached == {
        "tests/test_misc.py": 0,
        "tests/__init__.py": 1,
        "src/tomli/__init__.py": 2,
        "src/tomli/_parser.py": 3,
        "src/tomli/_re.py": 3,
        "src/tomli/_types.py": 4,
    }


def test_the_implementation_a_conftest_fixture_picks() -> None:
    # markupsafe: an autouse fixture in conftest imports each implementation by name.
    files = {
        "tests/conftest.py": (
            "from importlib import import_module\nimport pytest\n"
            "@pytest.fixture(params=('_native', '_speedups'))\n"
            "def escape(request):\n"
            "    return import_module(f'markupsafe.{request.param}').escape\n"
            "def _speedups():\n    import_module('markupsafe._speedups')\n"
        ),
        "tests/test_escape.py": "from markupsafe import Markup\n",
        "src/markupsafe/__init__.py": "from ._native import escape\n",
        "src/markupsafe/_native.py": "",
        "src/markupsafe/_speedups.py": "",
        "conftest.py": "from src.markupsafe import _native\n",
    }
    edges = _graph(files, "tests/test_escape.py")
    assert set(edges["tests/test_escape.py"]) == {
        "src/markupsafe/__init__.py",
        "tests/conftest.py",
        "conftest.py",
    }
    assert "src/markupsafe/_speedups.py" in edges["tests/conftest.py"]
    # An f-string's package: any of its modules may be the one the fixture picks (and its
    # __init__ runs first).
    picked = {"tests/conftest.py": "import importlib\nimportlib.import_module(f'markupsafe.{x}')\n"}
    edges = _graph({**files, **picked}, "tests/conftest.py")
    assert set(edges["tests/conftest.py"]) == {
        "src/markupsafe/__init__.py",
        "src/markupsafe/_native.py",
        "src/markupsafe/_speedups.py",
        "conftest.py",
    }
    assert "src/markupsafe/_native.py" in edges["src/markupsafe/__init__.py"]


def test_relative_imports_up_and_into_subpackages() -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/a/__init__.py": "from .. import b\nfrom ..c import helper\nfrom .sub import deep\n",
        "pkg/a/sub/__init__.py": "",
        "pkg/a/sub/deep.py": "",
        "pkg/b.py": "",
        "pkg/c/__init__.py": "",
        "pkg/c/helper.py": "",
        "tests/test_a.py": "import pkg.a\n",
    }
    edges = _graph(files, "tests/test_a.py")
    assert edges["tests/test_a.py"] == ("pkg/a/__init__.py", "pkg/__init__.py")
    assert set(edges["pkg/a/__init__.py"]) == {
        "pkg/b.py",
        "pkg/c/__init__.py",
        "pkg/c/helper.py",
        "pkg/a/sub/__init__.py",
        "pkg/a/sub/deep.py",
    }


def test_require_the_package_folder_through_package_json_main() -> None:
    # commander.js: `require('../')`, package.json main → index.js → lib/…
    files = {
        "package.json": json.dumps({"name": "commander", "main": "./index.js"}),
        "index.js": "const { Command } = require('./lib/command.js');\n",
        "lib/command.js": "const { Option } = require('./option');\nconst x = require('fs');\n",
        "lib/option.js": "",
        "tests/command.test.js": "const { Command } = require('../');\n",
    }
    reached = _reached(_graph(files, "tests/command.test.js"), "tests/command.test.js")
    assert reached == {
        "tests/command.test.js": 0,
        "index.js": 1,
        "lib/command.js": 2,
        "lib/option.js": 3,
    }


@pytest.mark.parametrize(
    ("manifest", "spec", "expected"),
    [
        (
            {"exports": {".": {"require": "./dist/cjs.js", "import": "./esm.mjs"}}},
            "..",
            "dist/cjs.js",
        ),
        ({"exports": "./src/main.ts"}, "../", "src/main.ts"),
        ({}, "..", "index.ts"),  # no entry named: the folder's index
        ({"name": "ms"}, "ms", "index.ts"),  # the package's own name
        ({"name": "ms"}, "../src/util.js", "src/util.ts"),  # TypeScript's ESM spelling
        ({"name": "ms"}, "../src/lib", "src/lib/index.js"),
        ({"name": "ms"}, "left-pad", None),  # another package
    ],
)
def test_javascript_specifiers(
    manifest: dict[str, object], spec: str, expected: str | None
) -> None:
    files = {
        "package.json": json.dumps(manifest),
        "dist/cjs.js": "",
        "esm.mjs": "",
        "src/main.ts": "",
        "src/util.ts": "",
        "src/lib/index.js": "",
        "index.ts": "",
        "test/x.spec.ts": f"import x from '{spec}';\n",
    }
    edges = _graph(files, "test/x.spec.ts")
    assert edges["test/x.spec.ts"] == ((expected,) if expected else ())


def test_java_imports_to_source_roots() -> None:
    files = {
        "src/main/java/org/x/Foo.java": "package org.x;\nimport org.x.util.Bar;\n",
        "src/main/java/org/x/util/Bar.java": "",
        "src/test/java/org/x/FooTest.java": (
            "import org.x.Foo;\nimport static org.x.util.Bar.make;\n"
        ),
    }
    reached = _reached(
        _graph(files, "src/test/java/org/x/FooTest.java"), "src/test/java/org/x/FooTest.java"
    )
    assert reached["src/main/java/org/x/Foo.java"] == 1
    assert reached["src/main/java/org/x/util/Bar.java"] == 1


def test_the_graph_is_bounded() -> None:
    files = {f"pkg/m{n}.py": f"from pkg import m{n + 1}\n" for n in range(20)}
    files["pkg/__init__.py"] = ""
    files["tests/test_m.py"] = "from pkg import m0\n"

    def read(paths: Sequence[str]) -> dict[str, str]:
        return {p: files[p] for p in paths}

    edges, cut = import_graph(["tests/test_m.py"], list(files), read, looks_like_test, max_depth=3)
    assert "pkg/m5.py" not in edges and cut
    edges, cut = import_graph(["tests/test_m.py"], list(files), read, looks_like_test, max_nodes=2)
    assert len(set(edges) - {"tests/test_m.py"}) <= 2 and cut
