"""JUnit XML reports in, test case records out: plain Python, no Django.

The formats read, as their tools write them:
- pytest, `junit_family=xunit1` (a `file` and `line` on each test case) and `xunit2` (none);
- Maven Surefire: one file per class, and for reruns `flakyFailure` / `flakyError` (failed,
  then passed: the test is *flaky*) and `rerunFailure` / `rerunError` (failed on every rerun);
- jest-junit: `testsuites` > `testsuite` (with a `file` when configured) > `testcase`;
- nested `testsuites` and `testsuite` elements, to any depth.

Every run of a test is one record with its `attempt` (1 for the first run): a rerun inside the
report is a later attempt of the same test. The XML is parsed by defusedxml (no entity expansion,
no external entities, no DTD at all: a JUnit report never needs one), streamed with `iterparse`
and each test case cleared once read, so a large report never sits in memory whole; the bytes
read are counted, and a report over the limit is refused as soon as it passes it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import IO, Literal
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

TestStatus = Literal["passed", "failed", "error", "skipped", "flaky"]

MAX_BYTES = 100 * 1024 * 1024
MAX_MESSAGE_CHARS = 4000
MAX_NAME_CHARS = 1000
MAX_SUITE_CHARS = 500

# Surefire's reruns: element -> (status of that failed run, status of the test's last run).
_FLAKY = {"flakyFailure": "failed", "flakyError": "error"}
_RERUN = {"rerunFailure": "failed", "rerunError": "error"}
_OUTCOME = {"failure": "failed", "error": "error", "skipped": "skipped"}


@dataclass(frozen=True)
class TestCaseRecord:
    __test__ = False  # not a test class, whatever pytest thinks of its name

    suite: str
    classname: str
    name: str
    file: str | None
    status: TestStatus
    duration: float | None
    failure_type: str = ""
    failure_message: str = ""
    attempt: int = 1

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.suite, self.classname, self.name)

    @property
    def label(self) -> str:
        return f"{self.classname}::{self.name}" if self.classname else self.name


class JUnitError(ValueError):
    """The report cannot be read; says which file and, where known, which line."""

    def __init__(self, filename: str, problem: str, line: int | None = None) -> None:
        where = f"{filename}, line {line}" if line is not None else filename
        super().__init__(f"{where}: {problem}")
        self.filename = filename
        self.line = line
        self.problem = problem


class _Limited:
    """A byte stream that refuses to be read past `limit` bytes."""

    def __init__(self, source: IO[bytes], limit: int, filename: str) -> None:
        self.source, self.limit, self.filename, self.count = source, limit, filename, 0

    def read(self, size: int = -1) -> bytes:
        chunk = self.source.read(size if size is not None and size >= 0 else self.limit + 1)
        self.count += len(chunk)
        if self.count > self.limit:
            raise JUnitError(self.filename, f"the report is larger than {self.limit:,} bytes")
        return chunk


def _text(value: str | None, limit: int) -> str:
    return (value or "").strip()[:limit]


def _duration(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value.replace(",", ""))
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _message(element: Element) -> str:
    """A failure's message: its `message` attribute, else the first lines of its text."""
    message = element.get("message") or (element.text or "")
    return _text(message, MAX_MESSAGE_CHARS)


def _records(case: Element, suite: str, suite_file: str | None) -> list[TestCaseRecord]:
    """The runs of one <testcase>, first attempt first."""
    name = _text(case.get("name"), MAX_NAME_CHARS)
    classname = _text(case.get("classname"), MAX_SUITE_CHARS)
    file = case.get("file") or suite_file
    duration = _duration(case.get("time"))

    def record(status: TestStatus, attempt: int, failure: Element | None = None) -> TestCaseRecord:
        return TestCaseRecord(
            suite=suite,
            classname=classname,
            name=name,
            file=file[:MAX_NAME_CHARS] if file else None,
            status=status,
            duration=duration,
            failure_type=_text(failure.get("type"), MAX_SUITE_CHARS) if failure is not None else "",
            failure_message=_message(failure) if failure is not None else "",
            attempt=attempt,
        )

    outcome = next((child for child in case if child.tag in _OUTCOME), None)
    flaky = [child for child in case if child.tag in _FLAKY]
    reruns = [child for child in case if child.tag in _RERUN]
    if flaky and outcome is None:
        # Failed, then passed on a rerun: the earlier runs failed, the last one is flaky.
        runs = [record(_FLAKY[run.tag], index, run) for index, run in enumerate(flaky, 1)]  # type: ignore[arg-type]
        return [*runs, record("flaky", len(flaky) + 1)]
    if outcome is None:
        return [record("passed", 1)]
    first = record(_OUTCOME[outcome.tag], 1, outcome)  # type: ignore[arg-type]
    rest = [record(_RERUN[run.tag], index, run) for index, run in enumerate(reruns, 2)]  # type: ignore[arg-type]
    return [first, *rest]


def parse(
    source: IO[bytes] | bytes, filename: str, *, max_bytes: int = MAX_BYTES
) -> Iterator[TestCaseRecord]:
    """The test case records of one JUnit XML report, as they are read.

    Raises JUnitError (with the file's name and the line) for malformed XML, a DTD or entity,
    a root that is not `testsuites` or `testsuite`, or more than `max_bytes`. The error can come
    after some records were yielded: a caller that stores them does so in a transaction.
    """
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    limited = _Limited(stream, max_bytes, filename)
    # The open elements: a suite's name and file are read when it starts, its cases when each
    # ends; a finished case is removed from its parent so the tree never grows.
    open_elements: list[Element] = []
    suites: list[tuple[str, str | None]] = []
    attempts: dict[tuple[str, str, str], int] = {}
    seen_root = False
    try:
        for event, element in iterparse(limited, events=("start", "end"), forbid_dtd=True):
            if event == "start":
                if not seen_root:
                    seen_root = True
                    if element.tag not in ("testsuites", "testsuite"):
                        raise JUnitError(
                            filename,
                            f"not a JUnit XML report (its root is <{element.tag}>, not "
                            "<testsuites> or <testsuite>)",
                        )
                open_elements.append(element)
                if element.tag == "testsuite":
                    outer_file = suites[-1][1] if suites else None
                    suites.append(
                        (
                            _text(element.get("name"), MAX_SUITE_CHARS),
                            element.get("file") or element.get("filepath") or outer_file,
                        )
                    )
                continue
            open_elements.pop()
            if element.tag == "testsuite":
                suites.pop()
            elif element.tag == "testcase" and not any(
                parent.tag == "testcase" for parent in open_elements
            ):
                suite, suite_file = suites[-1] if suites else ("", None)
                records = _records(element, suite, suite_file)
                offset = attempts.get(records[0].key, 0)
                for record in records:
                    # The same test twice in one report (a rerun written as its own case):
                    # later attempts.
                    if offset:
                        record = replace(record, attempt=offset + record.attempt)
                    attempts[record.key] = record.attempt
                    yield record
                element.clear()
                if open_elements:
                    open_elements[-1].remove(element)
    except JUnitError:
        raise
    except ParseError as exc:
        line, _column = exc.position
        problem = str(exc).split(":")[0] or "malformed XML"
        raise JUnitError(filename, f"malformed XML ({problem})", line) from None
    except DefusedXmlException as exc:
        raise JUnitError(
            filename, f"refused: {type(exc).__name__} (DTDs and entities are not allowed)"
        ) from None
    if not seen_root:
        raise JUnitError(filename, "the report is empty")
