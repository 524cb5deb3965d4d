"""The import graph at a release's head: which of the repository's files each test file reaches,
read from the sources as they stand (docs/decisions/2026-11-29-import-graph.md).

A failing test's "code under test" is rarely the file it imports by name: tomli's tests reach
the parser through their own package (`from . import tomllib`, the tests' `__init__` importing
`tomli`, whose `__init__` re-exports `_parser.loads`); markupsafe's conftest picks the module
under test in a fixture; commander.js' tests `require('../')`, package.json's `main` naming
`index.js`, which requires `lib/…`. So each file's imports are resolved to repository paths and
followed, breadth first, within bounds (`MAX_DEPTH` steps, `MAX_NODES` files).

Edges, each to a path of the repository:
- Python: `import a.b` / `from a.b import c` (a.b, a/b/c.py, and the packages' `__init__`s on
  the way), relative imports (`from . import x`, `from ..m import y`), `import_module("a.b")`
  with a literal name; a test file also reaches its package's `__init__` and every
  `conftest.py` from its folder up to the root (pytest runs them before the test).
- JavaScript/TypeScript: `require`, `import`, `import()` and `export … from` of a relative path
  or of the package's own name: the file, the file with a source suffix, a folder's
  package.json `main`/`exports`, a folder's `index.*` (`.js` written for a `.ts` file too).
- Java/Kotlin: an imported class to its file under any source root.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import PurePosixPath

from detective_client.python_trees import import_nodes

__all__ = ["MAX_DEPTH", "MAX_NODES", "Edges", "import_graph", "resolved_imports"]

MAX_DEPTH = 6  # import steps from a test file
MAX_NODES = 500  # files read beyond the test files, a release
MAX_PACKAGE_MODULES = 50  # modules an `import_module(f"pkg.{x}")` may name

Edges = dict[str, tuple[str, ...]]
ReadMany = Callable[[Sequence[str]], Mapping[str, str]]

_JS_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts", ".jsx")
_JS_SPECIFIER = re.compile(
    r"""(?:\bfrom\s*|\brequire\s*\(\s*|\bimport\s*\(\s*|^\s*import\s+)['"]([^'"\n]+)['"]""",
    re.MULTILINE,
)
_JAVA_IMPORT = re.compile(r"^\s*import\s+(?:static\s+)?([\w.]+?)(?:\.\*)?\s*;?\s*$", re.MULTILINE)
_CONDITIONS = ("require", "node", "import", "default")


class _Tree:
    """The head's paths, indexed by file name for suffix look-ups."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = set(paths)
        self.by_name: dict[str, list[str]] = {}
        for path in sorted(self.paths, key=lambda p: (p.count("/"), p)):
            self.by_name.setdefault(PurePosixPath(path).name, []).append(path)

    def ending(self, tail: str) -> str | None:
        """The path that is `tail` or ends with `/tail`, the shallowest (the source root's)."""
        if tail in self.paths:
            return tail
        for path in self.by_name.get(PurePosixPath(tail).name, ()):
            if path.endswith("/" + tail):
                return path
        return None


def _normalise(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def _folder(path: str) -> str:
    parent = str(PurePosixPath(path).parent)
    return "" if parent == "." else parent


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


# ---- Python --------------------------------------------------------------------------------


def _python_module(tree: _Tree, dotted: str, near: str | None = None) -> str | None:
    base = dotted.replace(".", "/")
    for tail in (f"{base}.py", f"{base}/__init__.py"):
        if near is not None:
            exact = _join(near, tail)
            if exact in tree.paths:
                return exact
        elif (found := tree.ending(tail)) is not None:
            return found
    return None


def _with_packages(tree: _Tree, module: str) -> list[str]:
    """A module's file and the `__init__.py` of each package above it (importing runs them)."""
    found = [module]
    folder = _folder(module)
    while folder:
        init = _join(folder, "__init__.py")
        if init not in tree.paths:
            break
        if init != module:
            found.append(init)
        folder = _folder(folder)
    return found


def _python_edges(path: str, source: str, tree: _Tree, is_test: bool) -> list[str]:
    out: list[str] = []

    def absolute(dotted: str) -> None:
        parts = dotted.split(".")
        for count in range(len(parts), 0, -1):
            found = _python_module(tree, ".".join(parts[:count]))
            if found is not None:
                out.extend(_with_packages(tree, found))
                return

    def relative(level: int, module: str | None, names: Sequence[str]) -> None:
        package = _folder(path)
        for _ in range(level - 1):
            package = _folder(package)
        if module:
            found = _python_module(tree, module, near=package)
            if found is None:
                return
            out.append(found)
            if found.endswith("__init__.py"):
                for name in names:
                    sub = _python_module(tree, name, near=_folder(found))
                    if sub is not None:
                        out.append(sub)
            return
        for name in names:
            # `from . import x`: the submodule x, else a name the package's __init__ defines.
            sub = _python_module(tree, name, near=package)
            init = _join(package, "__init__.py")
            out.append(sub if sub is not None else init)

    for node in import_nodes(source):
        if isinstance(node, ast.Import):
            for alias in node.names:
                absolute(alias.name)
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names if a.name != "*"]
            if node.level:
                relative(node.level, node.module, names)
            elif node.module:
                absolute(node.module)
                for name in names:
                    found = _python_module(tree, f"{node.module}.{name}")
                    if found is not None:
                        out.append(found)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
        ):
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                absolute(name.value)
            elif isinstance(name, ast.JoinedStr) and name.values:
                # import_module(f"pkg.{param}"): any module of the package may be the one.
                prefix = name.values[0]
                if isinstance(prefix, ast.Constant) and str(prefix.value).endswith("."):
                    for module in _package_modules(tree, str(prefix.value)[:-1]):
                        out.extend(_with_packages(tree, module))
    if is_test:
        out += _pytest_chain(path, tree)
    return [p for p in dict.fromkeys(out) if p in tree.paths and p != path]


def _package_modules(tree: _Tree, dotted: str) -> list[str]:
    """The modules directly in a package (what `import_module(f"pkg.{name}")` may import)."""
    init = _python_module(tree, dotted)
    if init is None or not init.endswith("/__init__.py"):
        return []
    folder = _folder(init)
    return sorted(
        p for p in tree.paths if _folder(p) == folder and p.endswith(".py") and p != init
    )[:MAX_PACKAGE_MODULES]


def _pytest_chain(path: str, tree: _Tree) -> list[str]:
    """What pytest runs before a test module: its package's `__init__`s and the conftests from
    its folder up to the root."""
    out: list[str] = []
    folder = _folder(path)
    while True:
        for name in ("__init__.py", "conftest.py"):
            candidate = _join(folder, name)
            if candidate in tree.paths and candidate != path:
                out.append(candidate)
        if not folder:
            return out
        folder = _folder(folder)


# ---- JavaScript / TypeScript ---------------------------------------------------------------


class _Packages:
    """package.json files read on demand: a folder's entry point and the root package's name."""

    def __init__(self, tree: _Tree, read: ReadMany) -> None:
        self.tree, self.read = tree, read
        self.cache: dict[str, dict[str, object]] = {}

    def manifest(self, folder: str) -> dict[str, object]:
        path = _join(folder, "package.json")
        if path not in self.cache:
            data: object = {}
            if path in self.tree.paths:
                try:
                    data = json.loads(self.read([path]).get(path, "") or "{}")
                except ValueError:
                    data = {}
            self.cache[path] = data if isinstance(data, dict) else {}
        return self.cache[path]

    def entry(self, folder: str) -> list[str]:
        """The relative paths a folder's package.json names as its entry, best first."""
        data = self.manifest(folder)
        found: list[str] = []
        exports = data.get("exports")
        if isinstance(exports, dict) and "." in exports:
            exports = exports["."]
        while isinstance(exports, dict):
            picked = next((exports[c] for c in _CONDITIONS if c in exports), None)
            exports = picked
        if isinstance(exports, str):
            found.append(exports)
        main = data.get("main")
        if isinstance(main, str):
            found.append(main)
        return found


def _js_file(tree: _Tree, base: str) -> str | None:
    if base in tree.paths and base.endswith(_JS_SUFFIXES):
        return base
    for suffix in _JS_SUFFIXES:
        if base + suffix in tree.paths:
            return base + suffix
    stem, dot, ext = base.rpartition(".")
    if dot and "." + ext in (".js", ".mjs", ".cjs", ".jsx"):  # TypeScript's ESM spelling
        for suffix in (".ts", ".tsx", ".mts", ".cts"):
            if stem + suffix in tree.paths:
                return stem + suffix
    return None


def _js_folder(tree: _Tree, folder: str, packages: _Packages) -> str | None:
    for entry in packages.entry(folder):
        target = _normalise(_join(folder, entry))
        found = _js_file(tree, target)
        if found is None:
            found = next(
                (_join(target, f"index{s}") for s in _JS_SUFFIXES
                 if _join(target, f"index{s}") in tree.paths),
                None,
            )  # fmt: skip
        if found is not None:
            return found
    for suffix in _JS_SUFFIXES:
        if _join(folder, f"index{suffix}") in tree.paths:
            return _join(folder, f"index{suffix}")
    return None


def _js_edges(path: str, source: str, tree: _Tree, packages: _Packages) -> list[str]:
    own = packages.manifest("").get("name")
    out: list[str] = []
    for spec in _JS_SPECIFIER.findall(source):
        if spec.startswith("."):
            base = _normalise(_join(_folder(path), spec))
        elif isinstance(own, str) and own and (spec == own or spec.startswith(own + "/")):
            base = _normalise(spec[len(own) :])
        else:
            continue  # another package: not the repository's code
        found = None if spec.endswith("/") else _js_file(tree, base)
        if found is None:
            found = _js_folder(tree, base, packages)
        if found is not None and found != path:
            out.append(found)
    return list(dict.fromkeys(out))


# ---- Java / Kotlin -------------------------------------------------------------------------


def _java_edges(path: str, source: str, tree: _Tree) -> list[str]:
    out: list[str] = []
    for name in _JAVA_IMPORT.findall(source):
        parts = name.split(".")
        for count in range(len(parts), 1, -1):  # a static import names a member past the class
            base = "/".join(parts[:count])
            found = tree.ending(base + ".java") or tree.ending(base + ".kt")
            if found is not None:
                out.append(found)
                break
    return [p for p in dict.fromkeys(out) if p != path]


# ---- the graph -----------------------------------------------------------------------------


def resolved_imports(
    path: str, source: str, tree: _Tree, packages: _Packages, is_test: bool
) -> list[str]:
    """The repository paths one file imports (and, for a test, what pytest runs before it)."""
    if path.endswith(".py"):
        return _python_edges(path, source, tree, is_test)
    if path.endswith(_JS_SUFFIXES):
        return _js_edges(path, source, tree, packages)
    if path.endswith((".java", ".kt")):
        return _java_edges(path, source, tree)
    return []


def import_graph(
    starts: Sequence[str],
    paths: Iterable[str],
    read: ReadMany,
    is_test: Callable[[str], bool],
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
) -> tuple[Edges, bool]:
    """Each file reached from `starts` (the test files) and the repository paths it imports,
    read level by level (`read` gives many paths' text at once); and whether a bound cut it."""
    tree = _Tree(paths)
    packages = _Packages(tree, read)
    edges: Edges = {}
    level = [p for p in dict.fromkeys(starts) if p in tree.paths]
    seen = set(level)
    extra = 0
    truncated = False
    for _ in range(max_depth + 1):
        if not level:
            break
        texts = read(level)
        following: list[str] = []
        for path in level:
            found = resolved_imports(path, texts.get(path, ""), tree, packages, is_test(path))
            edges[path] = tuple(found)
            for target in found:
                if target in seen:
                    continue
                if extra >= max_nodes:
                    truncated = True
                    continue
                seen.add(target)
                extra += 1
                following.append(target)
        level = following
    else:
        truncated = truncated or bool(level)
    return edges, truncated
