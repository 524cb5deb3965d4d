"""How far a failing test reaches into the code, and what its code calls: the evidence that
orders suspects that changed "code under test" (docs/decisions/2026-11-29-import-graph.md).

`import_distances` walks the import graph at the head, as the CI client sends it
(`detective_client.imports`: each file's imports, a name as written or a repository path
marked with a leading "/") or as a checkout reads it, from the failing test's files:
1 step for what the test imports (and its conftests), 3 for tomli's parser reached through
the tests' `__init__` and the package's. `called_names` reads what the test's code calls from
the failure's text (pytest prints the test's lines, jest its code frame) or from its source.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from risk.suspects import exercised_by_names, is_test_file

__all__ = [
    "CALL_MARK",
    "MAX_IMPORT_DEPTH",
    "called_names",
    "calls_in_test",
    "calls_near",
    "defining_modules",
    "import_distances",
    "parameter_names",
]

MAX_IMPORT_DEPTH = 8
CALL_MARK = "call:"  # detective_client.head: "call:<name>@<line>", a call in a test file
CALL_WINDOW = 30  # lines above the failing line of a test file whose calls are the test's
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]{2,})\s*\(")
# Calls every test makes, which name no code of the project.
_COMMON_CALLS = frozenset(
    {"assert", "assertEqual", "assertTrue", "assertFalse", "assertRaises", "assertIn"}
    | {"expect", "toBe", "toEqual", "toStrictEqual", "toThrow", "toHaveBeenCalled", "describe"}
    | {"test", "isinstance", "len", "str", "int", "dict", "list", "set", "tuple", "repr", "print"}
    | {"range", "raises", "approx", "type", "super", "getattr", "hasattr", "sorted", "Object"}
    | {"anonymous", "Error", "AssertionError", "function", "async", "return", "assertThat"}
)


def import_distances(
    starts: Sequence[str],
    names_of: Mapping[str, Sequence[str]],
    repo_paths: Iterable[str],
    max_depth: int = MAX_IMPORT_DEPTH,
) -> dict[str, int]:
    """Each repository path the files `starts` reach through their imports, with the fewest
    import steps (the starts are 0)."""
    paths = list(repo_paths)
    distance = dict.fromkeys(starts, 0)
    level = list(starts)
    for depth in range(1, max_depth + 1):
        following: list[str] = []
        for node in level:
            names = names_of.get(node, ())
            reached = {n[1:] for n in names if n.startswith("/")}
            written = [n for n in names if not n.startswith(("/", CALL_MARK))]
            if written or is_test_file(node):
                reached |= exercised_by_names(node, written, paths)
            for path in sorted(reached):
                if path not in distance:
                    distance[path] = depth
                    following.append(path)
        level = following
        if not level:
            break
    return distance


def called_names(text: str) -> frozenset[str]:
    """The names a failure's text shows called (`loads(` in pytest's echo of the test's lines,
    `parse(` in jest's code frame), less those every test calls."""
    return frozenset(_CALL.findall(text)) - _COMMON_CALLS


def calls_in_test(source: str, name: str) -> frozenset[str]:
    """What the Python test function `name` (its parameters `[…]` dropped) calls or reads as an
    attribute, at the head; nothing when it is not found."""
    wanted = name.split("[", 1)[0]
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == wanted:
            found: set[str] = set()
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call):
                    func = inner.func
                    if isinstance(func, ast.Attribute):
                        found.add(func.attr)
                    elif isinstance(func, ast.Name):
                        found.add(func.id)
            return frozenset(found) - _COMMON_CALLS
    return frozenset()


def calls_near(names: Sequence[str], lines: Sequence[int]) -> frozenset[str]:
    """The calls a test file makes (as the client sends them, "call:<name>@<line>") on the
    failing lines or up to `CALL_WINDOW` lines above them (the test's own body, near enough);
    every call of the file when no frame gives a line (jest-junit's report has no code frame)."""
    found: set[str] = set()
    for entry in names:
        if not entry.startswith(CALL_MARK):
            continue
        name, _, at = entry[len(CALL_MARK) :].rpartition("@")
        if not at.isdigit() or not name:
            continue
        line = int(at)
        if not lines or any(f - CALL_WINDOW <= line <= f for f in lines):
            found.add(name)
    return frozenset(found) - _COMMON_CALLS


_PARAMETER_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def parameter_names(test_name: str, defined: Iterable[str]) -> frozenset[str]:
    """The functions a parametrized test's id names (`test_cli[cmd_bump-args2-expectation2]`:
    pytest writes a function parameter by its name): those of `defined`, the functions at the
    head, only, so an id's values (`1.3.2-patch`) name nothing."""
    _, bracket, rest = test_name.partition("[")
    if not bracket:
        return frozenset()
    return frozenset(_PARAMETER_WORD.findall(rest)) & frozenset(defined)


def defining_modules(names: frozenset[str], scopes: Mapping[str, Sequence[Any]]) -> dict[str, int]:
    """For a failure whose test file is unknown (a doctest in a `.rst` page, whose examples
    run in a namespace a conftest fills): the modules that define a function its text calls,
    one step away, as if the test imported them."""
    return {
        path: 1
        for path, found in scopes.items()
        if not is_test_file(path) and any(getattr(s, "name", "") in names for s in found)
    }
