"""Python sources parsed once: the head's reading asks for the same file's tree up to three times
(its imports for the graph, the names it imports, its functions' scopes), and parsing was the
largest part of `read_head`'s own CPU on pallets/click (issue 39, item 3)."""

from __future__ import annotations

import ast
from collections import deque
from functools import lru_cache

__all__ = ["forget", "import_nodes", "tree_of"]

# The fields that hold statements: imports are statements, so only these are walked.
_STATEMENT_FIELDS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


# Keyed by the text itself: the callers pass the same string object, whose hash Python keeps.
# Bounded, as a tree takes far more memory than its text; `read_head` forgets them at its end.
@lru_cache(maxsize=256)
def _parsed(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def tree_of(source: str) -> ast.Module | None:
    """The module's tree, None when it does not parse. Shared: read it, never change it."""
    return _parsed(source)


@lru_cache(maxsize=256)
def import_nodes(source: str) -> tuple[ast.AST, ...]:
    """The module's `import` and `from ... import` statements, and when its text names
    `import_module` its calls too, in `ast.walk`'s order. Walking the statements only, not
    every expression, is what made this cheap (a tenth of the nodes); the order is the same,
    as a statement's ancestors are all statements (or an `except` or `case`, walked too)."""
    tree = tree_of(source)
    if tree is None:
        return ()
    if "import_module" in source:
        kinds = (ast.Import, ast.ImportFrom, ast.Call)
        return tuple(node for node in ast.walk(tree) if isinstance(node, kinds))
    found: list[ast.AST] = []
    queue: deque[ast.AST] = deque([tree])
    while queue:
        node = queue.popleft()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for name in node._fields:
            if name in _STATEMENT_FIELDS:
                children = getattr(node, name, None)
                if isinstance(children, list):
                    queue.extend(children)
    return tuple(found)


def forget() -> None:
    _parsed.cache_clear()
    import_nodes.cache_clear()
