"""Which commits of a release's range may have broken a new failure: suspects, ranked.

Over 600 lines on purpose: one ranking whose evidence kinds (frames, names, imports, scopes,
deletions) each decide its order and say why in the same sentences.

Pure functions over what ingestion keeps (issue 30): the failure's frames (file, line, function,
read by `sources.parsers.tracebacks`), its test file and the modules that file imports at the
release's head, and the range's commits with the line ranges they changed (`git log -p -U0`
hunks, read by `detective_client.hunks`).

The ranking, in three tiers:
1. "on the path": commits whose changed lines, as they stand at the head, a frame outside the
   test file runs through (distance 0) or sits near (at most `NEAR_LINES` lines away); closer
   first, then the innermost frame, then the newest commit.
2. "code under test": commits that changed a module the failing test exercises though no frame
   names it (pytest's "DID NOT RAISE" and a wrong return value leave only the test's own frame):
   the test file's imports at the head, and the naming of tests after their module
   (`test_timed.py` → `timed.py`, `FooTest.java` → `Foo.java`, `x.test.ts` → `x.ts`). Commits whose
   lines in that module still stand at the head first (their code is what ran), then the newest.
3. "test file": commits that changed the failing test's own file, those whose lines a frame of
   the test runs through first.
And "schema change" (`risk/schema_evidence.py`): where the failure is a schema or constraint
error (`Failure.schema_error`), the commits that changed a migration: the release's only one
ranks above every tier, several rank after "on the path" and before "code under test".
Bot commits and dependency bumps are suspects only in tier 1, where their files are on the path.
With no suspect, `NO_SUSPECT` says so: a sign of flakiness or of the environment.

Line numbers move: a commit's hunks are in its own numbering, and later commits of the range
shift or overwrite them. `lines_at_head` carries every commit's changed lines forward through the
later commits' hunks, so frames (read from a run at the head) are compared in the head's numbering.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Protocol

from risk.line_carry import Cuts
from risk.schema_evidence import schema_changes, shared_words
from risk.scope_evidence import NamedScope, modules_named, why_named

__all__ = [
    "NEAR_LINES",
    "NO_SUSPECT",
    "SCHEMA",
    "ChangedRange",
    "Failure",
    "RangeCommit",
    "Suspect",
    "exercised_by_names",
    "exercised_paths",
    "file_of_test_case",
    "imported_names",
    "lines_at_head",
    "python_imports",
    "rank_suspects",
    "sent_scope",
    "with_blame",
]

NEAR_LINES = 10
NO_SUSPECT = "no change in this release touches the code this failure runs through"
ON_PATH, UNDER_TEST, TEST_FILE = "on the path", "code under test", "test file"
SCHEMA = "schema change"


class HunkLike(Protocol):
    old_start: int
    old_count: int
    new_start: int
    new_count: int


class FileLike(Protocol):
    path: str
    old_path: str | None
    hunks: Sequence[HunkLike]


class FrameLike(Protocol):
    path: str
    line: int
    function: str
    in_repo: bool


@dataclass(frozen=True)
class RangeCommit:
    sha: str
    subject: str
    author: str
    files: Sequence[FileLike]
    # A bot's commit or a dependency bump (the commit classification says which).
    automated: bool = False


@dataclass(frozen=True)
class Failure:
    test_path: str
    frames: Sequence[FrameLike]
    # Repository paths of the modules the test files import at the head, and their namesakes
    # (`exercised_paths`, `namesakes`), for the test file and every test file a frame is in.
    exercised: frozenset[str] = frozenset()
    namesakes: frozenset[str] = frozenset()
    # Names the failure's message gives (`message_names`): "DID NOT RAISE SignatureExpired".
    names: frozenset[str] = frozenset()
    # Import steps from the failing test to each exercised path (`suspect_reach`): 1 for what
    # the test imports or its conftest, 3 for tomli's parser reached through two `__init__`s.
    distances: Mapping[str, int] = field(default_factory=dict)
    # The failing test's name and what its code calls (`suspect_reach.called_names`).
    test_name: str = ""
    called: frozenset[str] = frozenset()
    # The schema or constraint error the failure shows (`schema_evidence.schema_error`).
    schema_error: str = ""


@dataclass(frozen=True)
class Scope:
    """A function of a module at the head: its lines, and the words of its text and of the
    classes around it."""

    start: int
    end: int
    words: frozenset[str]
    name: str = ""


@dataclass(frozen=True)
class ChangedRange:
    """Lines `start`..`end` of `path` at the head were last written by `sha`.

    A deletion leaves no line; it is kept as the two lines around the gap (`deleted`).
    """

    path: str
    start: int
    end: int
    sha: str
    deleted: bool = False


@dataclass(frozen=True)
class Suspect:
    sha: str
    subject: str
    author: str
    tier: str
    path: str
    line: int | None
    distance: int | None
    reason: str


def lines_at_head(commits: Sequence[RangeCommit]) -> dict[str, list[ChangedRange]]:
    """Every commit's changed lines in the head's numbering, by path (`commits` newest first)."""
    owned: dict[str, list[ChangedRange]] = {}
    for commit in reversed(commits):
        for changed in commit.files:
            ranges = owned.pop(changed.old_path, []) if changed.old_path else []
            ranges += owned.pop(changed.path, [])
            cuts = Cuts(changed.hunks)
            carried = [
                ChangedRange(changed.path, s, e, r.sha, r.deleted)
                for r in ranges
                for s, e in cuts.carry(r.start, r.end)
            ]
            for hunk in changed.hunks:
                if hunk.new_count:
                    end = hunk.new_start + hunk.new_count - 1
                    carried.append(ChangedRange(changed.path, hunk.new_start, end, commit.sha))
                else:
                    gap = max(hunk.new_start, 1)
                    carried.append(ChangedRange(changed.path, gap, gap + 1, commit.sha, True))
            owned[changed.path] = carried
    return owned


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
# Words every failure message holds, which name no code of the project.
_MESSAGE_STOP = frozenset(
    {"assert", "where", "Failed", "RAISE", "None", "True", "False", "class", "self", "with"}
    | {"AssertionError", "Error", "Exception", "Traceback", "most", "recent", "call", "last"}
    | {"lambda", "object", "function", "method", "bound", "Expected", "expected", "Received"}
)


# A node stack frame in a dependency or node itself (`at Immediate.next (…/node_modules/tape/…)`):
# the runner's own functions, which name no code of the project.
_FOREIGN_FRAME = re.compile(r"\bat:? [^\n()]*?\(?(?:node:|[^\s()]*node_modules/)[^\s()]*\)?")

_PATH = re.compile(r"[^\s()'\"]*/[^\s()'\"]*")


def message_names(message: str) -> frozenset[str]:
    """The identifiers a failure's message names (an exception, a method, a class), less the
    runner's own frames'."""
    # A path's folders (`/tmp/…/test/num.js`) are no names either.
    words = _WORD.findall(_PATH.sub(" ", _FOREIGN_FRAME.sub(" ", message)))
    return frozenset(w for w in words if w not in _MESSAGE_STOP)


def python_scopes(source: str) -> list[Scope]:
    """Every function of a Python module at the head, with the words of its text and the
    names of its enclosing classes; nothing for source that does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines()
    scopes: list[Scope] = []

    def visit(node: ast.AST, classes: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, (*classes, child.name))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                end = child.end_lineno or child.lineno
                text = "\n".join(lines[child.lineno - 1 : end])
                words = frozenset(_WORD.findall(text)) | set(classes)
                scopes.append(Scope(child.lineno, end, words, child.name))
                visit(child, classes)

    visit(tree, ())
    return scopes


_NAME_MARK = "def:"  # detective_client.head.NAME_MARK


def sent_scope(start: int, end: int, words: Iterable[str]) -> Scope:
    """A function as the CI client sends it: its own name is the word marked "def:"."""
    found = list(words)
    name = next((w[len(_NAME_MARK) :] for w in found if w.startswith(_NAME_MARK)), "")
    return Scope(start, end, frozenset(w for w in found if not w.startswith(_NAME_MARK)), name)


def python_imports(source: str) -> list[str]:
    """The module names a Python file imports (`from a.b import c` gives `a.b` and `a.b.c`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


_JS_IMPORT = re.compile(r"""(?:from\s+|require\(\s*|import\s*\(?\s*)['"](\.{1,2}/[^'"]+)['"]""")
_JAVA_IMPORT = re.compile(r"^\s*import\s+(?:static\s+)?([\w.]+?)(?:\.\*)?\s*;", re.MULTILINE)
_SOURCE_SUFFIXES = (".py", ".java", ".kt", ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs")


def _named_after(test_path: str) -> list[str]:
    """The module a test is named after: test_timed.py, timed_test.py, FooTest.java, x.test.ts."""
    name = PurePosixPath(test_path).name
    patterns = (
        r"^test_(?P<m>.+)(?P<ext>\.py)$",
        r"^(?P<m>.+)_test(?P<ext>\.py|\.go)$",
        r"^(?P<m>.+?)(?:Tests?|IT)(?P<ext>\.java|\.kt)$",
        r"^(?P<m>.+)\.(?:test|spec)(?P<ext>\.[cm]?[jt]sx?)$",
    )
    for pattern in patterns:
        hit = re.match(pattern, name)
        if hit:
            return [hit["m"] + hit["ext"]]
    return []


_TEST_FOLDERS = frozenset({"test", "tests", "__tests__", "testing", "spec"})
# A whole suite in one file, as small node packages keep it (debug's and ms' `test.js`).
_TEST_FILE_NAMES = re.compile(r"^(?:test|tests|spec)\.[cm]?[jt]sx?$")


def is_test_file(path: str) -> bool:
    """A test's file by its name or folder (a frame there is the test's code, not the code's)."""
    parts = PurePosixPath(path).parts
    return (
        bool(_named_after(path))
        or bool(_TEST_FILE_NAMES.match(parts[-1] if parts else ""))
        or any(part in _TEST_FOLDERS for part in parts[:-1])
    )


def test_files(test_path: str, frames: Iterable[FrameLike]) -> list[str]:
    """The failing test's file and the other test files its frames run through (an inherited
    test's body lives in its base class's file), in that order."""
    found = [test_path] if test_path else []
    for frame in frames:
        if frame.in_repo and is_test_file(frame.path) and frame.path not in found:
            found.append(frame.path)
    return found


def namesakes(test_path: str, repo_paths: Iterable[str]) -> frozenset[str]:
    """The module the test file is named after, the one nearest the test where several are."""
    paths = [p for p in repo_paths if p.endswith(_SOURCE_SUFFIXES) and p != test_path]
    found: set[str] = set()
    for namesake in _named_after(test_path):
        candidates = [p for p in paths if PurePosixPath(p).name == namesake]
        if candidates:
            found.add(max(candidates, key=lambda p: _shared_tail_dirs(p, test_path)))
    return frozenset(found)


def imported_names(test_path: str, test_source: str) -> list[str]:
    """What a test file imports, as written: Python modules, Java/Kotlin classes, JS/TS relative
    paths (the CI client reads the same, `detective_client.head.imported_names`)."""
    if test_path.endswith(".py"):
        return python_imports(test_source)
    if test_path.endswith((".java", ".kt")):
        return _JAVA_IMPORT.findall(test_source)
    return _JS_IMPORT.findall(test_source)


def exercised_by_names(
    test_path: str, names: Iterable[str], repo_paths: Iterable[str]
) -> frozenset[str]:
    """The repository's files a test exercises, from its import names (`imported_names`, or as
    the CI client sent them) and its namesake."""
    paths = [p for p in repo_paths if p.endswith(_SOURCE_SUFFIXES) and p != test_path]
    found: set[str] = set()
    wanted: list[str] = []
    for name in names:
        if test_path.endswith(".py"):
            base = name.replace(".", "/")
            wanted += [f"{base}.py", f"{base}/__init__.py"]
        elif test_path.endswith((".java", ".kt")):
            wanted += [name.replace(".", "/") + ext for ext in (".java", ".kt")]
        else:
            base = _normalise(str(PurePosixPath(PurePosixPath(test_path).parent, name)))
            wanted += [base] + [base + ext for ext in _SOURCE_SUFFIXES[2:]]
            wanted += [f"{base}/index{ext}" for ext in _SOURCE_SUFFIXES[2:]]
    for want in wanted:
        found |= {p for p in paths if p == want or p.endswith("/" + want)}
    return frozenset(found) | namesakes(test_path, paths)


def exercised_paths(
    test_path: str, test_source: str | None, repo_paths: Iterable[str]
) -> frozenset[str]:
    """The repository's files the test exercises: its imports at the head, and its namesake."""
    names = imported_names(test_path, test_source) if test_source else []
    return exercised_by_names(test_path, names, repo_paths)


def _normalise(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def _shared_tail_dirs(a: str, b: str) -> int:
    left, right = PurePosixPath(a).parent.parts, PurePosixPath(b).parent.parts
    shared = 0
    while shared < min(len(left), len(right)) and left[-1 - shared] == right[-1 - shared]:
        shared += 1
    return shared


def _spread(commit: RangeCommit) -> int:
    """How many hunks a commit has: a one-line fix says more about one failure than a sweep
    ("improve typing") over every function does, when nothing else tells them apart."""
    return sum(len(f.hunks or ()) for f in commit.files)


def _distance(line: int, changed: ChangedRange) -> int:
    if changed.start <= line <= changed.end:
        return 0
    return changed.start - line if line < changed.start else line - changed.end


def _short(sha: str) -> str:
    return sha[:9]


def rank_suspects(
    failure: Failure,
    commits: Sequence[RangeCommit],
    at_head: Mapping[str, list[ChangedRange]] | None = None,
    near_lines: int = NEAR_LINES,
    scopes: Mapping[str, Sequence[Scope]] | None = None,
) -> list[Suspect]:
    """The range's commits that may have caused `failure`, most likely first (`commits` newest
    first; `at_head` is `lines_at_head(commits)`, passed when ranking many failures)."""
    owned = lines_at_head(commits) if at_head is None else at_head
    by_sha = {c.sha: c for c in commits}
    order = {c.sha: index for index, c in enumerate(commits)}
    frames = [f for f in failure.frames if f.in_repo]
    tests = set(test_files(failure.test_path, frames))
    best: dict[str, tuple[tuple[int, ...], Suspect]] = {}

    def offer(key: tuple[int, ...], suspect: Suspect) -> None:
        if suspect.sha not in best or _place(key) < _place(best[suspect.sha][0]):
            best[suspect.sha] = (key, suspect)

    if failure.schema_error:
        changed_schema = schema_changes(commits)
        for change in changed_schema:
            commit = by_sha[change.sha]
            named = {p: shared_words(failure.schema_error, p) for p in change.paths}
            path = max(change.paths, key=lambda p: len(named[p]))
            words = named[path]
            only = len(changed_schema) == 1
            reason = (
                f"{_short(commit.sha)} '{commit.subject}' changed the schema ({path}) and the "
                f"test fails on it ({failure.schema_error})"
                + (f"; its file names {', '.join(words)}" if words else "")
                + ("; the release's only schema change" if only else "")
            )
            offer(
                (3, 0 if only else 1, 0 if words else 1, _spread(commit), order[commit.sha]),
                Suspect(
                    commit.sha, commit.subject, commit.author, SCHEMA, path, None, None, reason
                ),
            )

    # Innermost frame last for Python, first for Java and node: depth counts from the failure
    # text's end for the former; order within a tie then hardly matters.
    for depth, frame in enumerate(reversed(frames)):
        if frame.path in tests:
            continue
        for changed in owned.get(frame.path, []):
            distance = _distance(frame.line, changed)
            if distance > near_lines:
                continue
            commit = by_sha[changed.sha]
            if changed.deleted:
                where = "is next to" if distance == 0 else f"is {distance} lines from"
                what = "lines removed by"
            else:
                where = "runs through" if distance == 0 else f"is {distance} lines from"
                what = "lines changed by"
            reason = (
                f"{frame.path} line {frame.line}"
                + (f" (in {frame.function})" if frame.function else "")
                + f" {where} {what} {_short(commit.sha)} '{commit.subject}'"
            )
            offer(
                (0, distance, depth, _spread(commit), order[commit.sha]),
                Suspect(
                    commit.sha, commit.subject, commit.author, ON_PATH,
                    frame.path, frame.line, distance, reason,
                ),
            )  # fmt: skip
    standing = {(r.path, r.sha) for path in failure.exercised for r in owned.get(path, [])}
    # How rare the failure's rarest name is among the module's functions: a name only the
    # changed function holds (IntRange) says more than one every function holds (convert).
    tied: dict[tuple[str, str], NamedScope] = {}
    wanted = failure.names | failure.called
    for (path, r), found in modules_named(failure.exercised, scopes or {}, owned, wanted):
        key = (path, r.sha)
        if key not in tied or found.key < tied[key].key:
            tied[key] = found
    for commit in commits:
        if commit.automated:
            continue
        for changed in commit.files:
            if changed.path in failure.exercised and changed.path not in tests:
                stands = (changed.path, commit.sha) in standing
                named = changed.path in failure.namesakes
                scoped = tied.get((changed.path, commit.sha))
                steps = failure.distances.get(changed.path, 1)
                test_name = failure.test_name or "the failing test"
                if " " in test_name:  # jest's "describe title": a sentence, not a name
                    test_name = f'"{test_name}"'
                why = [why_named(scoped, test_name, failure.called)] if scoped else []
                if named:
                    why.append("the test is named after it")
                if not failure.test_path:  # a doctest page: `defining_modules`
                    why.append("it defines a function the failure's text calls")
                elif steps <= 1:
                    why.append("the test imports it")
                else:
                    why.append(f"the test reaches it in {steps} import steps")
                reason = (
                    f"{_short(commit.sha)} '{commit.subject}' changed {changed.path}, which "
                    f"{failure.test_path or 'the failing test'} exercises: "
                    + "; ".join(why)
                    + ("" if stands else " (its lines there were rewritten later in the range)")
                )
                offer(
                    (1, *(scoped.key if scoped else (_UNTIED, 1)), 0 if named else 1,
                     steps, 0 if stands else 1, _spread(commit), order[commit.sha]),
                    Suspect(
                        commit.sha, commit.subject, commit.author, UNDER_TEST,
                        changed.path, None, None, reason,
                    ),
                )  # fmt: skip
            elif changed.path in tests:
                test_lines = [f.line for f in frames if f.path == changed.path]
                distances = [
                    _distance(line, r)
                    for r in owned.get(changed.path, [])
                    if r.sha == commit.sha
                    for line in test_lines
                ]
                nearest = min(distances, default=None)
                on_line = nearest is not None and nearest <= near_lines
                reason = f"{_short(commit.sha)} '{commit.subject}' changed the test file" + (
                    f" within {nearest} lines of the failing line" if on_line else ""
                )
                offer(
                    (2, nearest if on_line and nearest is not None else near_lines + 1,
                     _spread(commit), order[commit.sha]),
                    Suspect(
                        commit.sha, commit.subject, commit.author, TEST_FILE,
                        changed.path, None, nearest if on_line else None, reason,
                    ),
                )  # fmt: skip
    ranked = sorted(best.values(), key=lambda item: _place(item[0]))
    if len(ranked) > 1:
        (key, first), (other_key, second) = ranked[0], ranked[1]
        why = _why_first(key, other_key)
        tail = f"; first, ahead of {_short(second.sha)} '{second.subject}', as {why}"
        ranked[0] = (key, replace(first, reason=first.reason + tail))
    return [suspect for _, suspect in ranked]


# What each place of a tier's ordering key says, when it is where the first two suspects part.
_NEWER = "it is newer; nothing else tells them apart"
_NARROWER = "its change is narrower (hunks: {} against {})"
_KEY_WORDS: dict[str, tuple[str, ...]] = {
    ON_PATH: (
        "",
        "the frame is closer to its lines ({} against {} lines)",
        "its frame is nearer where the failure was raised",
        _NARROWER,
        _NEWER,
    ),
    UNDER_TEST: (
        "",
        "the name that ties it to the test is rarer ({} against {} functions)",
        "the test calls the function it changed, where the other's only mentions the name",
        "the test is named after the file it changed",
        "the test reaches it in fewer import steps ({} against {})",
        "its lines there still stand at the head",
        _NARROWER,
        _NEWER,
    ),
    TEST_FILE: (
        "",
        "its change is nearer the failing line ({} against {} lines)",
        _NARROWER,
        _NEWER,
    ),
}
_UNTIED = 1_000_000  # the rarity of a change tied to no name
_TIERS = (ON_PATH, UNDER_TEST, TEST_FILE, SCHEMA)
_KEY_WORDS[SCHEMA] = (
    "",
    "",
    "its file names a table or column of the error",
    _NARROWER,
    _NEWER,
)


def _place(key: tuple[int, ...]) -> tuple[float, tuple[int, ...]]:
    """Where a suspect's ordering key sorts: by tier, the release's only schema change (of a
    failure on the schema) above all, several between "on the path" and "code under test"."""
    if key[0] == 3:
        return (-1.0 if key[1] == 0 else 0.5), key
    return float(key[0]), key


def _why_first(key: tuple[int, ...], other: tuple[int, ...]) -> str:
    """Why the suspect with ordering key `key` ranks above the one with `other`, in words."""
    if key[0] != other[0]:
        if key[0] == 3 and key[1] == 0:
            return "a schema error points at the schema first"
        return f"its tier ({_TIERS[key[0]]}) ranks above the other's ({_TIERS[other[0]]})"
    words = _KEY_WORDS[_TIERS[key[0]]]
    for place in range(1, min(len(key), len(words))):
        if key[place] != other[place]:
            if key[0] == 1 and place == 1 and other[1] == _UNTIED:
                return "its change is in a function the test calls or the failure names"
            phrase = words[place]
            return phrase.format(key[place], other[place]) if "{}" in phrase else phrase
    return "nothing tells them apart"


def verdict_sentence(test: str, suspects: Sequence[Suspect]) -> str:
    """One sentence for the evidence: the top suspect, or that there is none."""
    if not suspects:
        return f"{test}: {NO_SUSPECT}"
    top = suspects[0]
    return f"{test} fails; first suspect ({top.tier}): {top.reason} ({top.author})"


class BlamedLike(Protocol):
    path: str
    start: int
    end: int
    sha: str


def with_blame(
    carried: Mapping[str, list[ChangedRange]], blamed: Iterable[BlamedLike]
) -> dict[str, list[ChangedRange]]:
    """`lines_at_head`'s ranges, with the lines of every blamed path replaced by what `git blame`
    says at the head (exact across merges); deletions, which blame cannot see, are kept."""
    by_path: dict[str, list[ChangedRange]] = {}
    for b in blamed:
        by_path.setdefault(b.path, []).append(ChangedRange(b.path, b.start, b.end, b.sha))
    out = {path: list(ranges) for path, ranges in carried.items()}
    for path, ranges in by_path.items():
        out[path] = ranges + [r for r in carried.get(path, []) if r.deleted]
    return out


def _by_file(file: str, paths: Sequence[str]) -> str:
    wanted = file.replace("\\", "/").lstrip("./")
    if not wanted:
        return ""
    hits = [p for p in paths if p == wanted or wanted.endswith("/" + p) or p.endswith(wanted)]
    return min(hits, key=len) if hits else ""


def file_of_test_case(
    classname: str,
    file: str | None,
    repo_paths: Iterable[str],
    suite: str = "",
    frames: Sequence[FrameLike] = (),
) -> str:
    """The repository path of a JUnit test case's file: its `file` attribute when the tool wrote
    one (pytest's xunit1, jest-junit's option), else from the classname, pytest's
    `tests.test_timed.TestX` or Surefire's `org.x.FooTest` (`Foo$Inner` too); else, for
    jest-junit's default report (no `file`, a describe block's title for a classname), the suite
    when it names a test file (`suiteNameTemplate: "{filepath}"`), or the first test file the
    failure's frames run through; "" if not found."""
    paths = list(repo_paths)
    if file and (hit := _by_file(file, paths)):
        return hit
    parts = classname.split("$", 1)[0].split(".")
    for count in range(len(parts), 0, -1):
        stem = "/".join(parts[:count])
        for suffix in (".py", ".java", ".kt", ".scala", ".groovy"):
            hits = [p for p in paths if p == stem + suffix or p.endswith("/" + stem + suffix)]
            if len(hits) == 1:
                return hits[0]
    if suite and is_test_file(suite.replace("\\", "/")) and (hit := _by_file(suite, paths)):
        return hit
    for frame in frames:
        if frame.in_repo and is_test_file(frame.path) and frame.path in set(paths):
            return frame.path
    return ""
