"""JUnit XML reports in, test case records out: plain Python, no Django.

The formats read, as their tools write them:
- pytest, `junit_family=xunit1` (a `file` and `line` on each test case) and `xunit2` (none);
  pytest 9's subtests are counted in the header's `tests` but not written as test cases (a test
  whose subtests failed has one `<failure>` each and a last one "contains N failed subtests"),
  an expected failure is `<skipped type="pytest.xfail">`, and a run stopped by Ctrl-C or a time
  box's SIGINT ends with a `<testcase>` with no name attribute (the mark of an interrupted run);
- Maven Surefire: one file per class, and for reruns `flakyFailure` / `flakyError` (failed,
  then passed: the test is *flaky*) and `rerunFailure` / `rerunError` (failed on every rerun);
- jest-junit: `testsuites` > `testsuite` (one per test file, its path as the suite's name) >
  `testcase`; the same test name in several files is several tests;
- TestNG: a data-driven test is written once per invocation, with the same name;
- nested `testsuites` and `testsuite` elements, to any depth.

A test is its suite with its class and name. Each `<testcase>` element is one *invocation*: the
same test twice in one report is two invocations (numbered 1, 2, ... in the order written), not
a rerun. A rerun is what the format marks as one (Surefire's elements above: later *attempts* of
the same invocation) or a later report of the same release (the caller numbers those).

Parsing is expat's, with defusedxml's own guards installed on it (no DTD at all, no entity
declaration, no external reference: a JUnit report never needs one; defusedxml's exceptions are
raised). The handlers are ours rather than ElementTree's: no element tree is built, only the
failure texts are kept, so the CPU is near the plain `iterparse` floor and the memory does not
grow with the report (measured in `manage.py bench --only junit`). The bytes read are counted,
and a report over the limit is refused as soon as it passes it.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, Literal, NamedTuple
from xml.parsers.expat import ErrorString, ExpatError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

TestStatus = Literal["passed", "failed", "error", "skipped", "flaky"]

MAX_BYTES = 100 * 1024 * 1024
MAX_MESSAGE_CHARS = 4000
# A traceback longer than this keeps its first and last lines (where a Java stack names the
# failing frame, where a Python traceback names the failing line) with a line saying so.
MAX_TRACEBACK_CHARS = 16_000
_TRACEBACK_HEAD = 11_000
MAX_NAME_CHARS = 1000
MAX_SUITE_CHARS = 500
XFAIL_TYPE = "pytest.xfail"
_CHUNK = 64 * 1024

# Surefire's reruns: element -> status of that failed run.
_FLAKY = {"flakyFailure": "failed", "flakyError": "error"}
_RERUN = {"rerunFailure": "failed", "rerunError": "error"}
_OUTCOME = {"failure": "failed", "error": "error", "skipped": "skipped"}
_RUNS = {**_FLAKY, **_RERUN, **_OUTCOME}


class TestCaseRecord(NamedTuple):
    """One run of one test. A tuple: one is made per test case, and a frozen dataclass's
    construction cost a third of the parser's time (measured)."""

    suite: str
    classname: str
    name: str
    file: str | None
    status: TestStatus
    duration: float | None
    failure_type: str = ""
    failure_message: str = ""
    attempt: int = 1
    invocation: int = 1
    traceback: str = ""

    __test__ = False  # not a test class, whatever pytest thinks of its name

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.suite, self.classname, self.name)

    @property
    def label(self) -> str:
        return f"{self.classname}::{self.name}" if self.classname else self.name

    @property
    def xfailed(self) -> bool:
        return self.status == "skipped" and self.failure_type == XFAIL_TYPE


@dataclass
class ReportHeader:
    """What the report's header counts beside its `<testcase>` elements: the outermost element
    that gives `tests` (the root `testsuites`, else the sum of the top-level `testsuite`s)."""

    tests: int | None = None
    failures: int | None = None
    test_cases: int = 0
    # pytest 9: the subtests that failed, from each test's "contains N failed subtests".
    failed_subtests: int = 0
    # The runner marked the run interrupted (pytest's nameless last <testcase>).
    interrupted: bool = False

    @property
    def not_written(self) -> int:
        """Tests the header counts that no `<testcase>` is written for (pytest 9's subtests)."""
        return max(0, (self.tests or 0) - self.test_cases)


class JUnitError(ValueError):
    """The report cannot be read; says which file and, where known, which line."""

    def __init__(self, filename: str, problem: str, line: int | None = None) -> None:
        where = f"{filename}, line {line}" if line is not None else filename
        super().__init__(f"{where}: {problem}")
        self.filename = filename
        self.line = line
        self.problem = problem


def _text(value: str | None, limit: int) -> str:
    return (value or "").strip()[:limit]


_FAILED_SUBTESTS = re.compile(r"contains (\d+) failed subtests?")
_THOUSANDS = re.compile(r"\d{1,3}(,\d{3})+(\.\d*)?")
_DECIMAL_COMMA = re.compile(r"\d*,\d+")


def duration(value: str | None) -> float | None:
    """Seconds from a `time` attribute, as the tools write it: `1.5`; Surefire's `1,234.5`
    (a locale's thousands separator); `1,5` (a decimal comma, from a locale that writes one).
    None when it is not a number of seconds (negative, not finite, unreadable)."""
    if not value:
        return None
    try:
        # The common case first: float() takes surrounding whitespace as strip() does and
        # refuses any comma, which the slower path below reads.
        seconds = float(value)
    except ValueError:
        return _duration_with_comma(value.strip())
    return seconds if 0 <= seconds < math.inf else None


def _duration_with_comma(value: str) -> float | None:
    if "," not in value:
        return None
    if _THOUSANDS.fullmatch(value):
        value = value.replace(",", "")
    elif _DECIMAL_COMMA.fullmatch(value):
        value = value.replace(",", ".")
    else:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < math.inf else None


def bounded_traceback(text: str) -> str:
    text = text.strip()
    if len(text) <= MAX_TRACEBACK_CHARS:
        return text
    tail = MAX_TRACEBACK_CHARS - _TRACEBACK_HEAD
    return (
        f"{text[:_TRACEBACK_HEAD]}\n[... cut: the text is longer than {MAX_TRACEBACK_CHARS:,} "
        f"characters ...]\n{text[-tail:]}"
    )


_Run = tuple[str, dict[str, str], list[str]]
# A record made without NamedTuple's generated __new__ (a Python frame a test case): the
# passed record of each case is made once, when the case starts.
_record = tuple.__new__


def _run(case: TestCaseRecord, run: _Run | None, status: str, attempt: int) -> TestCaseRecord:
    if run is None:
        failure_type = failure_message = traceback = ""
    else:
        _tag, attrs, chunks = run
        text = "".join(chunks)
        traceback = bounded_traceback(text)
        failure_type = _text(attrs.get("type"), MAX_SUITE_CHARS)
        # The message attribute, else the text (jest-junit writes no attribute); the traceback
        # is the text when the message is not already the whole of it.
        failure_message = _text(attrs.get("message") or text, MAX_MESSAGE_CHARS)
        if traceback == failure_message:
            traceback = ""
    return case._replace(
        status=status,
        failure_type=failure_type,
        failure_message=failure_message,
        attempt=attempt,
        traceback=traceback,
    )


def _records(case: TestCaseRecord, runs: list[_Run]) -> list[TestCaseRecord]:
    """The runs of one <testcase>, first attempt first; `case` is its passed record."""
    outcome = next((run for run in runs if run[0] in _OUTCOME), None)
    flaky = [run for run in runs if run[0] in _FLAKY]
    if flaky and outcome is None:
        # Failed, then passed on a rerun: the earlier runs failed, the last one is flaky.
        done = [_run(case, run, _FLAKY[run[0]], index) for index, run in enumerate(flaky, 1)]
        return [*done, _run(case, None, "flaky", len(flaky) + 1)]
    if outcome is None:
        return [case]
    reruns = [run for run in runs if run[0] in _RERUN]
    first = _run(case, outcome, _OUTCOME[outcome[0]], 1)
    return [first, *(_run(case, run, _RERUN[run[0]], i) for i, run in enumerate(reruns, 2))]


# The case being read when it is pytest's mark of an interrupted run: nothing is stored for it.
_INTERRUPTION_MARK = TestCaseRecord("", "", "", None, "passed", None)


class _Reader:
    """expat's handlers: a suite's name and file are read when it starts, a case's runs when
    it ends; text is kept only inside a run element (a failure, a skip, a rerun).

    These run once per element of the report, most of the parser's time: they read their state
    into locals once, and a case without a run element (most of them) costs a dict lookup, a
    hash and one tuple."""

    def __init__(self, filename: str, header: ReportHeader) -> None:
        self.filename = filename
        self.header = header
        self.out: list[TestCaseRecord] = []
        self.depth = 0
        self.suites: list[tuple[str, str | None]] = []
        self.suite: tuple[str, str | None] = ("", None)
        # The passed record of the case being read; its run elements, None until one comes.
        self.case: TestCaseRecord | None = None
        self.case_depth = 0
        self.runs: list[_Run] | None = None
        self.chunks: list[str] | None = None
        self.kept = 0
        self.test_cases = 0
        self.expat: Any = None
        # The invocations written so far of each test, by the hash of its key: 16 bytes a
        # test rather than its names (a collision numbers an invocation wrong, never loses one).
        self.invocations: dict[int, int] = {}

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        depth = self.depth = self.depth + 1
        if self.case is not None:
            if depth == self.case_depth + 1:
                if tag in _RUNS:
                    chunks: list[str] = []
                    self.chunks, self.kept = chunks, 0
                    self.expat.CharacterDataHandler = self.data
                    if self.runs is None:
                        self.runs = [(tag, attrs, chunks)]
                    else:
                        self.runs.append((tag, attrs, chunks))
            elif self.chunks is not None and depth == self.case_depth + 2:
                # Surefire writes a rerun's trace as its <stackTrace> child.
                self._capture(tag == "stackTrace")
            return
        if tag == "testcase":
            if "name" not in attrs and "classname" not in attrs:
                # pytest's mark of a run stopped by KeyboardInterrupt (Ctrl-C, a time box's
                # SIGINT): a <testcase> with no name attribute at all, no test of its own, so
                # nothing is stored for it. (jest-junit writes name="" for a real test.)
                self.header.interrupted = True
                self.case, self.case_depth = _INTERRUPTION_MARK, depth
                return
            suite, suite_file = self.suite
            name = attrs.get("name")
            name = name.strip()[:MAX_NAME_CHARS] if name else ""
            classname = attrs.get("classname")
            classname = classname.strip()[:MAX_SUITE_CHARS] if classname else ""
            key = hash((suite, classname, name))
            invocations = self.invocations
            invocation = invocations[key] = invocations.get(key, 0) + 1
            file = attrs.get("file") or suite_file
            time = attrs.get("time")
            try:
                # duration()'s common case, inline: a frame less a test case.
                seconds: float | None = float(time)  # type: ignore[arg-type]
                if not 0 <= seconds < math.inf:
                    seconds = None
            except (TypeError, ValueError):
                seconds = duration(time)
            self.case = _record(
                TestCaseRecord,
                (
                    suite,
                    classname,
                    name,
                    file[:MAX_NAME_CHARS] if file else None,
                    "passed",
                    seconds,
                    "",
                    "",
                    1,
                    invocation,
                    "",
                ),
            )
            self.case_depth = depth
            self.test_cases += 1
        elif tag == "testsuite":
            outer_file = self.suite[1]
            if not self.suites and self.header_from_suites:
                self._count(attrs)
            self.suite = (
                _text(attrs.get("name"), MAX_SUITE_CHARS),
                attrs.get("file") or attrs.get("filepath") or outer_file,
            )
            self.suites.append(self.suite)
        elif depth == 1:
            if tag != "testsuites":
                raise JUnitError(
                    self.filename,
                    f"not a JUnit XML report (its root is <{tag}>, not <testsuites> or "
                    "<testsuite>)",
                )
            self.header_from_suites = attrs.get("tests") is None
            if not self.header_from_suites:
                self._count(attrs)
        if depth == 1 and tag == "testsuite":
            self.header_from_suites = True

    header_from_suites = True

    def _count(self, attrs: dict[str, str]) -> None:
        for field in ("tests", "failures"):
            try:
                value = int(attrs.get(field, ""))
            except ValueError:
                continue
            setattr(self.header, field, (getattr(self.header, field) or 0) + max(0, value))

    def end(self, tag: str) -> None:
        depth = self.depth
        self.depth = depth - 1
        case = self.case
        if case is not None:
            if depth == self.case_depth:
                runs = self.runs
                if case is _INTERRUPTION_MARK:
                    if runs is not None:
                        self.runs = self.chunks = None
                        self._capture(False)
                elif runs is None:
                    self.out.append(case)
                else:
                    self._count_subtests(runs)
                    self.out.extend(_records(case, runs))
                    self.runs = self.chunks = None
                    self._capture(False)
                self.case = None
            elif depth == self.case_depth + 1:
                if self.chunks is not None:
                    self.chunks = None
                    self._capture(False)
            elif depth == self.case_depth + 2 and self.chunks is not None:
                self._capture(True)
            return
        if tag == "testsuite":
            self.suites.pop()
            self.suite = self.suites[-1] if self.suites else ("", None)

    def _count_subtests(self, runs: list[_Run]) -> None:
        for tag, attrs, _chunks in runs:
            if tag == "failure" and (found := _FAILED_SUBTESTS.fullmatch(attrs.get("message", ""))):
                self.header.failed_subtests += int(found.group(1))

    def _capture(self, on: bool) -> None:
        # Text is handed to Python only inside a run element: the whitespace and output
        # between elements (most of a report) never leaves expat.
        self.expat.CharacterDataHandler = self.data if on else None

    def data(self, text: str) -> None:
        chunks = self.chunks
        if chunks is None:
            return
        chunks.append(text)
        self.kept += len(text)
        if self.kept > 3 * MAX_TRACEBACK_CHARS:
            # A runaway text: its head and its tail are kept, never the whole of it.
            # (the head stays the head: the text is longer than head and tail together).
            joined = "".join(chunks)
            chunks[:] = [joined[:_TRACEBACK_HEAD], joined[-MAX_TRACEBACK_CHARS:]]
            self.kept = _TRACEBACK_HEAD + MAX_TRACEBACK_CHARS


def parse(
    source: IO[bytes] | bytes,
    filename: str,
    *,
    max_bytes: int = MAX_BYTES,
    header: ReportHeader | None = None,
) -> Iterator[TestCaseRecord]:
    """The test case records of one JUnit XML report, as they are read.

    `header`, when given, is filled with what the report's header counts (read it once the
    records are all read). Raises JUnitError (with the file's name and the line) for malformed
    XML, a DTD or entity, a root that is not `testsuites` or `testsuite`, or more than
    `max_bytes`. The error can come after some records were yielded: a caller that stores them
    does so in a transaction.
    """
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    reader = _Reader(filename, header if header is not None else ReportHeader())
    # defusedxml's parser installs its guards on the expat parser it makes; ours are the
    # element handlers. The DefusedXMLParser object itself is not fed.
    expat = DefusedXMLParser(forbid_dtd=True).parser
    expat.ordered_attributes = False
    expat.specified_attributes = False
    expat.buffer_text = True
    expat.buffer_size = _CHUNK
    expat.StartElementHandler = reader.start
    expat.EndElementHandler = reader.end
    reader.expat = expat
    expat.DefaultHandlerExpand = None
    expat.CommentHandler = None
    expat.ProcessingInstructionHandler = None
    read = 0
    try:
        while True:
            chunk = stream.read(_CHUNK)
            read += len(chunk)
            if read > max_bytes:
                raise JUnitError(filename, f"the report is larger than {max_bytes:,} bytes")
            expat.Parse(chunk, not chunk)
            # Counted by the reader per case, added to the header once a chunk.
            reader.header.test_cases += reader.test_cases
            reader.test_cases = 0
            if reader.out:
                yield from reader.out
                reader.out.clear()
            if not chunk:
                break
    except JUnitError:
        raise
    except ExpatError as exc:
        if reader.depth == 0 and not read:
            raise JUnitError(filename, "the report is empty") from None
        problem = ErrorString(exc.code) if exc.code else "malformed XML"
        raise JUnitError(filename, f"malformed XML ({problem})", exc.lineno) from None
    except DefusedXmlException as exc:
        raise JUnitError(
            filename, f"refused: {type(exc).__name__} (DTDs and entities are not allowed)"
        ) from None
