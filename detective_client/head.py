"""What the server needs from the release's head to rank a failure's suspect commits, read in
the CI job, the only place with a checkout (docs/decisions/2026-11-27-suspect-commits.md).

The client sends, with the commits (each file's `-U0` hunks, `with_hunks`), one `HeadRecord`:
- `tests`: for the repository's test files at the head, the import graph's edges as
  repository paths marked "/" (`imports.import_graph`: relative imports, package `__init__`s,
  conftests, package.json entries, followed from file to file), then the names they import as
  written (a Python module, a Java class, a JS relative path), which the server resolves by
  itself; and the files the graph reached, with their edges. The server walks it from a
  failing test: its "code under test", and how many import steps away. Test files the range
  changed come first.
- `blame`: for the paths the range changed that stand at the head (not prose, pictures,
  settings or dotfiles: `blame_worth`), which commit of the range last wrote each line
  (`hunks.blame_at_head`): exact across merged branches, where carrying hunks forward misplaces
  a branch's lines (17 of 23 culprits first without it, 23 with).
- `scopes`: for the Python, JavaScript/TypeScript and Java files among those, each function's
  lines and the words of its text, its own name first (`python_scopes`, `scopes.scopes_of`);
  for the files the import graph reached that the range did not change, the words that name
  a function (its calls, followed across modules),
  so a suspect whose lines sit in the function a failing test calls or names comes first.

Bounded, so a monorepo's job stays quick and its request small: at most `MAX_TEST_FILES` test
files (`MAX_IMPORTS` names each) and `MAX_BLAMED_PATHS` blamed paths (the newest commits'
first); past a bound the rest is left out and `truncated` says so. No source text is sent.

The test-file rule and the import reading repeat `risk.suspects`' (`is_test_file`,
`imported_names`): the client is a distribution of its own that cannot import `risk`;
`sources/services/head_contract_test.py` holds the two to the same answers.
"""

from __future__ import annotations

import ast
import gc
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

from detective_client.git import GitError, resolve, split_range
from detective_client.hunks import HunkRange, blame_at_head, skipped_file
from detective_client.imports import import_graph
from detective_client.python_trees import forget, import_nodes, tree_of
from detective_client.records import BlameTuple, CommitRecord, HeadRecord, ScopeTuple
from detective_client.scopes import scopes_of

__all__ = [
    "MAX_BLAMED_PATHS",
    "MAX_IMPORTS",
    "MAX_TEST_FILES",
    "imported_names",
    "looks_like_test",
    "python_scopes",
    "read_head",
    "with_hunks",
]

MAX_TEST_FILES = 2_000
MAX_IMPORTS = 200
MAX_BLAMED_PATHS = 300
MAX_SCOPES = 2_000  # functions a file
MAX_SCOPED_PATHS = MAX_BLAMED_PATHS  # files whose functions are sent (the server's bound)
MAX_SOURCE_CHARS = 500_000  # a file read for its imports
MAX_WORDS = 300  # words a function
CALL_MARK = "call:"  # a call in a test file (`calls_in_file`), `risk.suspect_reach.CALL_MARK`
MAX_CALLS = 100  # calls a test file
NAME_MARK = "def:"  # the word that gives a function's own name (`risk.suspects.sent_scope`)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_SOURCE_SUFFIXES = (".py", ".java", ".kt", ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs")
_TEST_NAMES = (
    r"^test_.+\.py$",
    r"^.+_test\.(?:py|go)$",
    r"^.+?(?:Tests?|IT)\.(?:java|kt)$",
    r"^.+\.(?:test|spec)\.[cm]?[jt]sx?$",
)
_PROSE_SUFFIXES = (
    *(".md", ".markdown", ".rst", ".txt", ".adoc", ".svg", ".png", ".jpg", ".jpeg", ".gif"),
    # Settings and data: read by code, never run as a frame (a template or a script is).
    *(".ico", ".toml", ".yaml", ".yml", ".json", ".ini", ".cfg", ".csv", ".lock"),
)
_PROSE_NAMES = ("readme", "license", "licence", "changes", "changelog", "authors", "notice")
_TEST_FOLDERS = frozenset({"test", "tests", "__tests__", "testing", "spec"})
_TEST_FILE_NAMES = re.compile(r"^(?:test|tests|spec)\.[cm]?[jt]sx?$")
_JS_IMPORT = re.compile(r"""(?:from\s+|require\(\s*|import\s*\(?\s*)['"](\.{1,2}/[^'"]+)['"]""")
_JAVA_IMPORT = re.compile(r"^\s*import\s+(?:static\s+)?([\w.]+?)(?:\.\*)?\s*;", re.MULTILINE)


def with_hunks(commits: Sequence[CommitRecord], hunks: HunkRange) -> list[CommitRecord]:
    """The commit records with each file's hunks: () for a file read with no line changed (a
    pure rename), None where none were read (binary, lock or generated, past the bound)."""
    read = {c.sha: {f.path: f for f in c.files} for c in hunks.commits}
    out: list[CommitRecord] = []
    for commit in commits:
        files = read.get(commit.sha)
        if files is None:
            out.append(commit)
            continue
        changed = []
        for change in commit.files:
            found = files.get(change.path)
            if found is not None:
                numbers = tuple(
                    (h.old_start, h.old_count, h.new_start, h.new_count) for h in found.hunks
                )
                changed.append(replace(change, hunks=numbers))
            elif change.binary or skipped_file(change.path):
                changed.append(change)
            else:
                changed.append(replace(change, hunks=()))
        out.append(replace(commit, files=tuple(changed)))
    return out


def blame_worth(path: str) -> bool:
    """A path whose lines a failure's frame can run through: not prose, pictures, settings
    and data files or a repository's dotfiles. A `git blame` costs a walk of the range's
    history each (half of `ingest --git-repo`'s CPU on pallets/click, 42 of its 166 paths
    Markdown); a path left out keeps its lines carried forward from the hunks
    (`risk.suspects.lines_at_head`)."""
    name = PurePosixPath(path).name.lower()
    return not (
        name.endswith(_PROSE_SUFFIXES)
        or name.startswith(_PROSE_NAMES)
        or (name.startswith(".") and "." not in name[1:])
    )


def looks_like_test(path: str) -> bool:
    """A test's source file by its name or folder (`risk.suspects.is_test_file`'s rule)."""
    parts = PurePosixPath(path).parts
    if not path.endswith((*_SOURCE_SUFFIXES, ".go")):
        return False
    return (
        any(re.match(p, parts[-1]) for p in _TEST_NAMES)
        or bool(_TEST_FILE_NAMES.match(parts[-1]))
        or any(part in _TEST_FOLDERS for part in parts[:-1])
    )


def imported_names(test_path: str, source: str) -> list[str]:
    """What a test file imports, as written: Python modules (`from a.b import c` gives `a.b`
    and `a.b.c`), Java/Kotlin classes, JS/TS relative paths (`risk.suspects` resolves them)."""
    if test_path.endswith(".py"):
        names: list[str] = []
        for node in import_nodes(source):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
                names += [f"{node.module}.{alias.name}" for alias in node.names]
        return names
    if test_path.endswith((".java", ".kt")):
        return _JAVA_IMPORT.findall(source)
    return _JS_IMPORT.findall(source)


_CALL = re.compile(r"(?<![\w$])([A-Za-z_$][\w$]{2,})\s*\(")
_NOT_CALLS = frozenset(
    {"if", "for", "while", "switch", "catch", "function", "return", "typeof", "def", "class"}
    | {"expect", "describe", "test", "assert", "toBe", "toEqual", "require", "import", "print"}
)


def calls_in_file(source: str) -> list[str]:
    """The calls a test file makes, with their lines, marked `CALL_MARK` ("call:parse@12"):
    the server keeps those near a failure's line in the file, what the failing test calls,
    where its report shows no code (jest-junit's). At most `MAX_CALLS`."""
    found: list[str] = []
    for number, line in enumerate(source.splitlines(), 1):
        for hit in _CALL.finditer(line):
            name = hit[1]
            before = line[: hit.start()].rstrip().rsplit(None, 1)[-1:]
            if name not in _NOT_CALLS and before not in (["def"], ["function"], ["fun"]):
                found.append(f"{CALL_MARK}{name}@{number}")
                if len(found) >= MAX_CALLS:
                    return found
    return found


def python_scopes(source: str) -> list[ScopeTuple]:
    """Every function of a Python module: its lines, and the words of its text and of its
    enclosing classes (`risk.suspects.python_scopes`' rule), at most `MAX_WORDS` each, the
    first its own name marked `NAME_MARK`."""
    tree = tree_of(source)
    if tree is None:
        return []
    lines = source.splitlines()
    scopes: list[ScopeTuple] = []

    def visit(node: ast.AST, classes: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, (*classes, child.name))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                end = child.end_lineno or child.lineno
                text = "\n".join(lines[child.lineno - 1 : end])
                words = sorted(set(_WORD.findall(text)) | set(classes))[: MAX_WORDS - 1]
                # Its own name first, marked: the evidence says "its change is in `loads`".
                scopes.append((child.lineno, end, (f"{NAME_MARK}{child.name}", *words)))
                visit(child, classes)

    visit(tree, ())
    return scopes[:MAX_SCOPES]


def _git_lines(repo: Path, *args: str) -> list[str]:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "core.quotepath=off", *args],
        capture_output=True,
        env={**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"},
        check=False,
    )
    if done.returncode != 0:
        raise GitError(f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode("utf-8", errors="replace").split("\0")


def _sources(repo: Path, head: str, paths: Sequence[str]) -> dict[str, str]:
    """The text of each path at `head`, through one `git cat-file --batch`."""
    wanted = [p for p in paths if "\n" not in p]
    done = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch"],
        input="".join(f"{head}:{p}\n" for p in wanted).encode(),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise GitError(f"git cat-file failed: {done.stderr.decode(errors='replace').strip()}")
    out, data, at = {}, done.stdout, 0
    for path in wanted:
        end = data.index(b"\n", at)
        header = data[at:end].split()
        at = end + 1
        if len(header) != 3 or header[1] != b"blob":
            continue  # "<name> missing", or not a file
        size = int(header[2])
        out[path] = data[at : at + size].decode("utf-8", errors="replace")
        at += size + 1
    return out


def _add_call_scopes(
    scopes: dict[str, tuple[ScopeTuple, ...]],
    edges: Mapping[str, Sequence[str]],
    texts: Mapping[str, str],
    is_test: Callable[[str], bool],
) -> None:
    """The functions of the files the import graph reached that the range did not change, each
    with only the words that name a function of the files sent (its calls): what a call from
    the test crosses on its way to a changed function in another module (python-semver's CLI
    test calls `cmd_bump` in cli.py, whose table names `bump_minor` in version.py). Up to
    `MAX_SCOPED_PATHS` files in all, the changed ones' first: a server checks that bound."""
    # In the graph's order (breadth first from the tests), so the bound cuts the farthest.
    reached = list(dict.fromkeys([*edges, *(q for found in edges.values() for q in found)]))
    wanted = [
        p for p in reached
        if p not in scopes and p in texts and not is_test(p)
        and (p.endswith(".py") or scopes_of(p) is not None)
    ][: max(0, MAX_SCOPED_PATHS - len(scopes))]  # fmt: skip
    read: dict[str, list[ScopeTuple]] = {}
    for path in wanted:
        reader = python_scopes if path.endswith(".py") else scopes_of(path)
        if reader is not None and (found := reader(texts[path])[:MAX_SCOPES]):
            read[path] = found
    defined = {
        words[0][len(NAME_MARK) :]
        for found in (*scopes.values(), *read.values())
        for _, _, words in found
        if words and words[0].startswith(NAME_MARK)
    }
    for path, found in read.items():
        scopes[path] = tuple(
            (start, end, (words[0], *(w for w in words[1:] if w in defined)))
            for start, end, words in found
        )


def read_head(repo: Path, rev_range: str, hunks: HunkRange) -> HeadRecord:
    """The head's facts for `rev_range` (its hunks already read), within the bounds."""
    # The syntax trees are hundreds of thousands of objects without cycles: the collector's
    # passes over them were ~40 % of the reading's own CPU on pallets/click (0.8-1.0 s -> 0.46-
    # 0.55 s with it paused; issue 39, item 3). It runs again when the reading ends.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _read_head(repo, rev_range, hunks)
    finally:
        forget()  # the parsed trees are this reading's only
        if collecting:
            gc.enable()


def _read_head(repo: Path, rev_range: str, hunks: HunkRange) -> HeadRecord:
    repo = Path(repo)
    head = resolve(repo, split_range(rev_range)[1])
    at_head = [p for p in _git_lines(repo, "ls-tree", "-r", "-z", "--name-only", head) if p]
    standing = set(at_head)
    seen: dict[str, None] = {}  # newest commit's paths first
    for commit in hunks.commits:
        for f in commit.files:
            if f.path in standing:
                seen.setdefault(f.path)
    changed = list(seen)
    tests = [p for p in at_head if looks_like_test(p)]
    first = [p for p in changed if looks_like_test(p)]
    first_set = set(first)
    ordered = first + [p for p in tests if p not in first_set]
    chosen = ordered[:MAX_TEST_FILES]
    # A test "file" of megabytes is data written as code (idna's 1.4 MB test_idna_uts46.py):
    # its imports are not read, which took 25 s of parsing on a busy machine.
    texts = {p: t for p, t in _sources(repo, head, chosen).items() if len(t) <= MAX_SOURCE_CHARS}

    chosen_set = set(chosen)

    def read(paths: Sequence[str]) -> dict[str, str]:
        missing = [p for p in paths if p not in texts and p not in chosen_set]
        if missing:
            found = _sources(repo, head, missing)
            texts.update({p: t for p, t in found.items() if len(t) <= MAX_SOURCE_CHARS})
        return {p: texts[p] for p in paths if p in texts}

    # The graph's edges as repository paths marked "/", before the names as written (which an
    # older server resolves by itself), so a bound cuts the latter first.
    edges, graph_cut = import_graph(chosen, at_head, read, looks_like_test)
    imports: dict[str, tuple[str, ...]] = {}
    for path in chosen:
        if path in texts:
            names = [f"/{p}" for p in edges.get(path, ())] + imported_names(path, texts[path])
            names += calls_in_file(texts[path])  # last: the bound cuts them first
            imports[path] = tuple(dict.fromkeys(names))[:MAX_IMPORTS]
    for path, found in edges.items():
        if path not in imports and found:
            imports[path] = tuple(f"/{p}" for p in found)[:MAX_IMPORTS]
    worth = [p for p in changed if blame_worth(p)]
    blamed_paths = worth[:MAX_BLAMED_PATHS]
    readable = [p for p in blamed_paths if p.endswith(".py") or scopes_of(p) is not None]
    scopes: dict[str, tuple[ScopeTuple, ...]] = {}
    for path, text in _sources(repo, head, readable).items():
        reader = python_scopes if path.endswith(".py") else scopes_of(path)
        if reader is not None:
            scopes[path] = tuple(reader(text)[:MAX_SCOPES])
    _add_call_scopes(scopes, edges, texts, looks_like_test)
    blame: dict[str, list[BlameTuple]] = {}
    for lines in blame_at_head(repo, rev_range, blamed_paths):
        blame.setdefault(lines.path, []).append((lines.start, lines.end, lines.sha))
    truncated = len(ordered) > MAX_TEST_FILES or len(worth) > MAX_BLAMED_PATHS or graph_cut
    return HeadRecord(
        sha=head,
        tests=dict(imports.items()),
        blame={p: tuple(r) for p, r in blame.items()},
        truncated=truncated or hunks.truncated,
        scopes={p: s for p, s in scopes.items() if s},
    )
