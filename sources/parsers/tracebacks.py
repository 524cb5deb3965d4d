"""Read a failed test's text into frames (file, line, function), with paths as the repository's.

The formats are those the test tools write into JUnit XML's `<failure>` text:
- pytest's long and short tracebacks: `path:line: Exc` / `path:line: in func` location lines,
  `>` and `E` lines, `_ _ _` separators between entries (the function of a long entry is the
  `def` its source shows);
- Python's own `File "…", line N, in f` (pytest's `--tb=native`, unittest);
- Java stack traces as Surefire and TestNG write them, `at pkg.Class.method(File.java:29)`, mapped
  to a path by package (`pkg/Class.java`, found under `src/main/java/` or wherever the repository
  keeps it, given its file list);
- node's as jest writes them, `at fn (src/x.test.ts:12:5)` or `at src/x.ts:3:9`, and an ES
  module's as a URL, `at fn (file:///ci/repo/tests/x.js:18:10)` (node:test's reporters).

Paths are normalised to the repository's: with the repository's file list, a frame's path is the
listed path that shares the longest run of trailing components with it (so a CI runner's
`/home/runner/work/r/r/`, a venv's `site-packages/` or a Windows drive do not matter), and a frame
in `node_modules`, a `site-packages` package the repository does not hold, or the runtime is kept
with `in_repo` False. Without a file list, the known prefixes are stripped and every frame is kept
as read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Frame", "RepoPaths", "read_frames"]


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str
    in_repo: bool


_PYTHON = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>\S+))?')
# `tests/x.py:7: AssertionError`, `tests/x.py:7: in test_x`, `src/x.py:2: ` (a long entry).
_PYTEST_LOCATION = re.compile(
    r"^\s*(?P<path>[^\s:][^:]*\.pyx?):(?P<line>\d+):(?: in (?P<func>\S+)| .*|)$"
)
_PYTEST_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(?P<func>\w+)\s*\(")
_PYTEST_SEPARATOR = re.compile(r"^(?:_ ){3,}_?\s*$")
_STACK_JOINED = re.compile(r"(?<=\S)\s{2,}(?=at \S)")
_JAVA = re.compile(
    r"^\s*at (?:[\w.$/@-]+/)?(?P<cls>[\w$.]+)\.(?P<method>[\w$<>]+)"
    r"\((?P<file>[\w$-]+\.(?:java|kt|scala|groovy)):(?P<line>\d+)\)"
)
# An ES module's frames are URLs (`file:///repo/tests/x.js:18:10`): the path is what follows.
_NODE = re.compile(
    r"^\s*at:? (?:(?P<func>.+?) \()?(?:file://)?(?P<path>(?:[A-Za-z]:\\|/|\.{0,2}/?)?[^\s():]"
    r"[^():]*\.(?:[cm]?[jt]sx?|vue|svelte)):(?P<line>\d+):\d+\)?\s*$"
)
# Frames of the runtime and the test frameworks, when no file list says what the repository holds.
_JAVA_OUTSIDE = (
    "java.",
    "javax.",
    "jdk.",
    "sun.",
    "kotlin.",
    "org.junit.",
    "org.testng.",
    "junit.",
)
_OUTSIDE = ("node_modules/", "site-packages/", "dist-packages/", "/lib/python", "internal/")
_RUNNER_PREFIXES = (
    re.compile(r"^/home/runner/work/[^/]+/[^/]+/"),
    re.compile(r"^[A-Za-z]:/a/[^/]+/[^/]+/"),
    re.compile(r"^/github/workspace/"),
    re.compile(r"^/builds/[^/]+/[^/]+/"),
    re.compile(r"^.*/(?:site|dist)-packages/"),
    re.compile(r"^\./"),
)


class RepoPaths:
    """The repository's file list, looked up by a frame path's trailing components."""

    def __init__(self, paths: Iterable[str]) -> None:
        self._by_name: dict[str, list[tuple[str, ...]]] = {}
        for path in paths:
            parts = tuple(p for p in path.replace("\\", "/").split("/") if p)
            if parts:
                self._by_name.setdefault(parts[-1], []).append(parts)

    def match(self, raw: str) -> str | None:
        """The listed path sharing the most trailing components with `raw`; None if none or tied."""
        parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
        if not parts or any(marker in raw.replace("\\", "/") for marker in _OUTSIDE[:1]):
            return None
        best: list[tuple[str, ...]] = []
        best_shared = 0
        for candidate in self._by_name.get(parts[-1], []):
            shared = 0
            while (
                shared < min(len(candidate), len(parts))
                and candidate[-1 - shared] == parts[-1 - shared]
            ):
                shared += 1
            if shared > best_shared:
                best, best_shared = [candidate], shared
            elif shared == best_shared:
                best.append(candidate)
        # A path matched whole beats one that parts from the frame's next folder: the frame
        # /ci/repo/dedupe.js is the root's dedupe.js, not tests/dedupe.js.
        whole = [candidate for candidate in best if len(candidate) == best_shared]
        if len(best) > 1 and len(whole) == 1 and len(parts) > best_shared:
            best = whole
        # A file name alone is no match for a deeper path: a library's utils.py is not ours.
        if len(best) != 1 or best_shared < min(2, len(best[0]), len(parts)):
            return None
        return "/".join(best[0])

    def match_java(self, package_path: str) -> str | None:
        """A Java-like class's file by its package path (`pkg/Class.java`), under any root."""
        found = self.match(package_path)
        if found is None or not found.endswith(package_path):
            return None
        return found


def _strip(raw: str) -> str:
    path = raw.replace("\\", "/")
    for prefix in _RUNNER_PREFIXES:
        path = prefix.sub("", path)
    return path


def _frame(raw: str, line: int, function: str, repo: RepoPaths | None) -> Frame:
    if repo is None:
        path = _strip(raw)
        outside = any(marker in raw.replace("\\", "/") for marker in _OUTSIDE)
        absolute = path.startswith("/") or re.match(r"^[A-Za-z]:/", path) is not None
        return Frame(path, line, function, not outside and not absolute)
    found = repo.match(raw)
    if found is None:
        return Frame(_strip(raw), line, function, False)
    return Frame(found, line, function, True)


def _java_frames(text: str, repo: RepoPaths | None) -> list[Frame]:
    frames = []
    for line in text.splitlines():
        hit = _JAVA.match(line)
        if hit is None:
            continue
        cls = hit["cls"].split("$", 1)[0]
        package = cls.rsplit(".", 1)[0].replace(".", "/") if "." in cls else ""
        package_path = f"{package}/{hit['file']}" if package else hit["file"]
        function = f"{cls.rsplit('.', 1)[-1]}.{hit['method']}"
        if repo is None:
            outside = cls.startswith(_JAVA_OUTSIDE) or ".surefire." in cls
            frames.append(Frame(package_path, int(hit["line"]), function, not outside))
            continue
        found = repo.match_java(package_path)
        frames.append(Frame(found or package_path, int(hit["line"]), function, found is not None))
    return frames


def _pytest_frames(lines: list[str], repo: RepoPaths | None) -> list[Frame]:
    frames = []
    function = ""
    for line in lines:
        if _PYTEST_SEPARATOR.match(line):
            function = ""
            continue
        definition = _PYTEST_DEF.match(line.lstrip(">"))
        if definition and not function:
            function = definition["func"]
            continue
        hit = _PYTEST_LOCATION.match(line)
        if hit is None:
            continue
        frames.append(_frame(hit["path"], int(hit["line"]), hit["func"] or function, repo))
        function = ""
    return frames


def read_frames(text: str, repo_paths: RepoPaths | Iterable[str] | None = None) -> list[Frame]:
    """The frames of one failure's text, outermost call first where the format says.

    Python and pytest list the outermost call first; Java and node list the innermost first, and
    their order is kept as written (callers rank by closeness to changed lines, not by order).
    """
    repo = (
        repo_paths
        if isinstance(repo_paths, RepoPaths) or repo_paths is None
        else RepoPaths(repo_paths)
    )
    lines = text.splitlines()
    python = []
    for line in lines:
        hit = _PYTHON.match(line)
        if hit:
            python.append(_frame(hit["path"], int(hit["line"]), hit["func"] or "", repo))
    if python:
        return python
    pytest = _pytest_frames(lines, repo)
    if pytest:
        return pytest
    java = _java_frames(text, repo)
    if java:
        return java
    node = []
    # tap-junit writes a TAP report's stack on one line ("…:548:48)     at Test.<anonymous> (…"),
    # and tape's own diagnostics name the assertion's frame as `at: Test.<anonymous> (…)`.
    for line in _STACK_JOINED.sub("\n", text).splitlines():
        hit = _NODE.match(line)
        if hit:
            function = (hit["func"] or "").replace("Object.<anonymous>", "").strip()
            node.append(_frame(hit["path"], int(hit["line"]), function, repo))
    return node
