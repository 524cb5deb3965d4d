"""The import statements found by walking statements only, in `ast.walk`'s order."""

from __future__ import annotations

import ast

from detective_client.python_trees import forget, import_nodes, tree_of

SOURCE = """
import os
from a.b import c
def f():
    import inner
    try:
        from . import rel
    except ImportError:
        import fallback
    finally:
        import last
class K:
    import in_class
    def m(self):
        if True:
            import deep
        else:
            import other
match x:
    case 1:
        import in_case
with open("x") as handle:
    import in_with
for item in []:
    pass
else:
    import in_else
"""


def _names(nodes: tuple[ast.AST, ...]) -> list[str]:
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out += [f"{node.module}:{a.name}" for a in node.names]
    return out


def test_the_statements_walk_finds_every_import_in_ast_walks_order() -> None:
    walked = tuple(
        n for n in ast.walk(ast.parse(SOURCE)) if isinstance(n, ast.Import | ast.ImportFrom)
    )
    found = import_nodes(SOURCE)
    assert _names(found) == _names(walked)
    assert len(found) == 12


def test_import_module_calls_are_found_anywhere() -> None:
    source = "x = [importlib.import_module('pkg.mod') for _ in range(1)]\nimport os\n"
    found = import_nodes(source)
    calls = [n.args[0].value for n in found if isinstance(n, ast.Call) and n.args]
    assert "pkg.mod" in calls
    assert _names(found) == ["os"]


def test_a_tree_is_parsed_once_until_forgotten() -> None:
    source = "import os\n"
    assert tree_of(source) is tree_of(source)
    first = tree_of(source)
    forget()
    assert tree_of(source) is not first
    assert tree_of("def (:\n") is None and import_nodes("def (:\n") == ()
