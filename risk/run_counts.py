"""How much of the suite ran, and how pytest counts it: interrupted runs and subtests.

Two things a passing report can hide:

- **An interrupted run.** pytest stopped by Ctrl-C or a time box's SIGINT writes its JUnit
  report with the tests that ran before it and a nameless last `<testcase>` (the runner's mark,
  `tests.interrupted`); stopped by `-x`/`--maxfail` it writes no mark at all. Either way the
  tests that never ran vanish from the report, and the rest reads as a complete, passing run
  (412 of packaging's 54,136 tests were stored so). So a run is *partial* when the runner
  marked it, or when fewer than `partial_run_share_below` of the usual number of tests ran:
  the median of the service's recent releases with results (`History.earlier_test_counts`),
  from `partial_run_min_usual` tests (a young suite's 6 tests going to 2 is as likely a
  deletion). Said with its figures ("412 of the usual 54,136 tests ran") at
  `partial_run_level`: never green.
- **pytest 9's subtests.** A test with failing subtests is one failed test in pytest's own
  count and its subtests are counted apart ("6 failed, 1 passed, 4 subtests passed" is 2 tests
  and 4 subtests failing); the report's header counts them in `tests` with no `<testcase>` of
  their own (`tests.not_in_test_cases`) and each failing test says "contains N failed
  subtests" (`tests.failed_subtests`). `results_said` puts tests and subtests apart.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from risk.settings import PolicySettings
from risk.signal import Signal, number, plural


def ran_count(tests: Mapping[str, Any]) -> int | None:
    """The tests (not subtests) the results say ran: passed, failed, skipped and xfailed."""
    counts = [number(tests.get(key)) for key in ("passed", "failed", "skipped", "xfailed")]
    if all(count is None for count in counts):
        return None
    return int(sum(count for count in counts if count is not None))


def usual_tests(earlier: Sequence[tuple[str, int]]) -> tuple[int, int] | None:
    """The usual number of tests, the median of the earlier releases' that ran some, and of how
    many releases; None without one."""
    counts = [count for _, count in earlier if count > 0]
    if not counts:
        return None
    return int(statistics.median(counts)), len(counts)


def subtests_said(tests: Mapping[str, Any]) -> str:
    """ "8 subtests (4 failed)", or "" when the results count none."""
    subtests = int(number(tests.get("not_in_test_cases")) or 0)
    if not subtests:
        return ""
    failed = int(number(tests.get("failed_subtests")) or 0)
    return plural(subtests, "subtest") + (f" ({failed:,} failed)" if failed else "")


def failed_subtests_said(tests: Mapping[str, Any]) -> str:
    """ "4 of 8 subtests failed", or "" when none failed."""
    subtests = int(number(tests.get("not_in_test_cases")) or 0)
    failed = int(number(tests.get("failed_subtests")) or 0)
    if not (subtests and failed):
        return ""
    return f"{failed:,} of {plural(subtests, 'subtest')} failed"


def results_said(
    tests: Mapping[str, Any],
    earlier: Sequence[tuple[str, int]] = (),
    cfg: PolicySettings | None = None,
) -> str:
    """The results in pytest's own terms, tests and subtests apart, and how much of the usual
    suite ran when it did not all run: "3 tests (2 failed, 1 passed) and 8 subtests (4 failed)".
    """
    ran = ran_count(tests)
    if ran is None:
        return ""
    parts = [
        f"{int(value):,} {key}"
        for key in ("failed", "passed", "skipped", "xfailed")
        if (value := number(tests.get(key)))
    ]
    said = plural(ran, "test") + (f" ({', '.join(parts)})" if parts else "")
    if subtests := subtests_said(tests):
        said += f" and {subtests}"
    partial = _partial(tests, earlier, cfg or PolicySettings())
    if partial:
        said += f"; {partial}"
    return said


def _partial(
    tests: Mapping[str, Any], earlier: Sequence[tuple[str, int]], cfg: PolicySettings
) -> str:
    """Why the run is partial, in words, or "" when it is not."""
    ran = ran_count(tests)
    if not ran:
        return ""  # nothing ran at all: `no_tests_ran` says so
    usual = usual_tests(earlier)
    of_usual = ""
    if usual is not None and usual[0] > ran:
        releases = "the last release" if usual[1] == 1 else f"the last {usual[1]} releases"
        of_usual = f"{ran:,} of the usual {usual[0]:,} tests ran (the median of {releases})"
    if tests.get("interrupted") is True:
        return "the runner marked the run interrupted: " + (
            of_usual or f"only {plural(ran, 'test')} ran before it stopped"
        )
    share = cfg.partial_run_share_below
    if (
        share is not None
        and usual is not None
        and usual[0] >= cfg.partial_run_min_usual
        and ran < share * usual[0]
    ):
        return f"{of_usual}: the run looks interrupted"
    return ""


def partial_run_signal(
    tests: Mapping[str, Any], earlier: Sequence[tuple[str, int]], cfg: PolicySettings
) -> Signal | None:
    """The run was interrupted or most of the usual tests vanished: what did not run shows
    nothing about the release, so its passes never make it green."""
    said = _partial(tests, earlier, cfg)
    if not said:
        return None
    ran = ran_count(tests) or 0
    share = cfg.partial_run_share_below
    return Signal(
        name="partial_test_run",
        label="Partial test run",
        level=cfg.partial_run_level,
        critical=False,
        figure=ran,
        threshold=f"{cfg.partial_run_level} when the runner marks the run interrupted"
        + (
            f" or fewer than {share * 100:.0f} % of the usual number of tests ran"
            if share is not None
            else ""
        ),
        detail=f"{said[0].upper()}{said[1:]}, so the tests that did not run show nothing about "
        "this release",
    )


__all__ = [
    "failed_subtests_said",
    "partial_run_signal",
    "ran_count",
    "results_said",
    "subtests_said",
    "usual_tests",
]
