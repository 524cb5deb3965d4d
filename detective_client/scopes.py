"""Functions, methods and classes of JavaScript, TypeScript and Java files at the head, read with
tree-sitter's grammars (not patterns): each function's lines and the words of its text, as
`head.python_scopes` gives Python's, so a suspect whose change sits in the function a failing
test calls ranks first in every language the readers know.

A function with no name of its own (`items.map(x => x.id)`) is part of the function around it;
one assigned a name (`exports.parse = function`, `const parse = () =>`, a class field) is a
scope under that name. Without the grammars installed (an older client's environment), no
scopes are read and the ranking goes by the other evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

__all__ = ["LANGUAGES", "NAME_MARK", "scopes_of", "tree_sitter_scopes"]

NAME_MARK = "def:"
MAX_SCOPES = 2_000
MAX_WORDS = 300
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]{3,}")
_JS_FUNCTIONS = frozenset(
    {"function_declaration", "generator_function_declaration", "method_definition"}
    | {"function_expression", "function", "generator_function", "arrow_function"}
)
_JS_CLASSES = frozenset({"class_declaration", "class", "abstract_class_declaration"})
_JAVA_FUNCTIONS = frozenset({"method_declaration", "constructor_declaration"})
_JAVA_CLASSES = frozenset(
    {"class_declaration", "interface_declaration", "enum_declaration", "record_declaration"}
)
# Suffix → (grammar, function node types, class node types).
LANGUAGES: dict[str, tuple[str, frozenset[str], frozenset[str]]] = {
    **dict.fromkeys((".js", ".mjs", ".cjs", ".jsx"), ("javascript", _JS_FUNCTIONS, _JS_CLASSES)),
    **dict.fromkeys((".ts", ".mts", ".cts"), ("typescript", _JS_FUNCTIONS, _JS_CLASSES)),
    ".tsx": ("tsx", _JS_FUNCTIONS, _JS_CLASSES),
    ".java": ("java", _JAVA_FUNCTIONS, _JAVA_CLASSES),
}


@cache
def _parser(grammar: str) -> Any | None:
    try:
        from tree_sitter import Language, Parser  # optional: an older client has none

        if grammar == "javascript":
            import tree_sitter_javascript as module

            language = module.language()
        elif grammar == "java":
            import tree_sitter_java as module

            language = module.language()
        else:
            import tree_sitter_typescript as module

            language = module.language_tsx() if grammar == "tsx" else module.language_typescript()
    except ImportError:
        return None
    return Parser(Language(language))


def _text(node: Any) -> str:
    return node.text.decode("utf-8", errors="replace") if node is not None else ""


def _own_name(node: Any) -> str:
    """A function's name: its own, or the one it is assigned to."""
    named = node.child_by_field_name("name")
    if named is not None:
        return _text(named)
    parent = node.parent
    if parent is None:
        return ""
    if parent.type == "variable_declarator":
        return _text(parent.child_by_field_name("name"))
    if parent.type == "assignment_expression":
        left = parent.child_by_field_name("left")
        if left is not None and left.type == "member_expression":
            return _text(left.child_by_field_name("property"))
        return _text(left)
    if parent.type == "pair":
        return _text(parent.child_by_field_name("key")).strip("'\"")
    if parent.type in ("public_field_definition", "field_definition"):
        return _text(parent.child_by_field_name("name") or parent.child_by_field_name("property"))
    return ""


def tree_sitter_scopes(
    source: str, grammar: str, functions: frozenset[str], classes: frozenset[str]
) -> list[tuple[int, int, tuple[str, ...]]]:
    """Every named function or method of `source`: (first line, last line, words), the words'
    first its own name marked `NAME_MARK`, with its classes' names among the words."""
    parser = _parser(grammar)
    if parser is None:
        return []
    tree = parser.parse(source.encode("utf-8", errors="replace"))
    found: list[tuple[int, int, tuple[str, ...]]] = []
    stack: list[tuple[Any, tuple[str, ...]]] = [(tree.root_node, ())]
    while stack and len(found) < MAX_SCOPES:
        node, around = stack.pop()
        inner = around
        if node.type in classes:
            inner = (*around, _text(node.child_by_field_name("name")))
        elif node.type in functions:
            name = _own_name(node)
            if name:
                words = set(_WORD.findall(_text(node))) | {c for c in around if c}
                kept = sorted(words)[: MAX_WORDS - 1]
                start, end = node.start_point[0] + 1, node.end_point[0] + 1
                found.append((start, end, (f"{NAME_MARK}{name}", *kept)))
        stack += [(child, inner) for child in reversed(node.named_children)]
    return sorted(found, key=lambda s: (s[0], -s[1]))


def scopes_of(path: str) -> Callable[[str], list[tuple[int, int, tuple[str, ...]]]] | None:
    """The reader of a path's functions by its suffix, None for a language not read here."""
    for suffix, (grammar, functions, classes) in LANGUAGES.items():
        if path.endswith(suffix):
            return lambda source: tree_sitter_scopes(source, grammar, functions, classes)
    return None
