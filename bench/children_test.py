"""The benchmarks that measure in a child process (`python -c CHILD`) keep their code in a string,
which neither ruff nor an import sees: a module moved elsewhere breaks it only when `bench`
runs (the summary benchmark did, after `judge_release` moved to `sources.judging`). These
tests read each child as Python does: every module it imports exists with the names it takes,
and every name it uses is bound."""

from __future__ import annotations

import ast
import builtins
import importlib

import pytest

from bench import junit_ingest, release_detail, release_summary

CHILDREN = {
    "junit_ingest": junit_ingest.CHILD,
    "release_detail": release_detail.CHILD,
    "release_summary": release_summary.CHILD,
}


def bound_and_used(tree: ast.AST) -> tuple[set[str], set[str]]:
    bound: set[str] = set(dir(builtins))
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
    return bound, used


@pytest.mark.parametrize("name", sorted(CHILDREN))
def test_every_name_a_child_uses_is_bound(name: str) -> None:
    bound, used = bound_and_used(ast.parse(CHILDREN[name]))
    assert used - bound == set()


@pytest.mark.parametrize("name", sorted(CHILDREN))
def test_every_import_of_a_child_exists(name: str, db: None) -> None:
    for node in ast.walk(ast.parse(CHILDREN[name])):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):
                    importlib.import_module(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)


def test_a_name_no_import_binds_is_caught() -> None:
    bound, used = bound_and_used(ast.parse("from sources import judging\nverdicts.judge(1)\n"))
    assert used - bound == {"verdicts"}
