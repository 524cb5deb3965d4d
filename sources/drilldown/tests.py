"""A release's tests, one entry per test (its attempts folded), with its history in the
service: for `GET /api/releases/<version>/tests`.

A test's status is its last attempt's: failed (a failure or an error), skipped, passed, or
flaky (it passed after an attempt of the same release, so the same commit, failed). Its
history is the one the risk policy reads (`sources.history.test_histories` over the policy's
`history_releases`): in how many of the service's last releases it failed or was flaky, the
first release it ever failed in, and whether the policy takes it for known flaky
(`risk.history_signals.is_known_flaky`) or a new failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Case, Count, IntegerField, OuterRef, Q, QuerySet, Subquery, When

from releases import verdicts
from releases.models import Release
from risk.history import TestHistory
from risk.history_signals import is_known_flaky
from risk.settings import PolicySettings
from sources.drilldown.paging import PageBounds
from sources.history import earlier, test_histories
from sources.models import TestCase, TestStatus

STATUSES = ("failed", "flaky", "passed", "skipped")
MAX_MESSAGE_CHARS = 500
# A traceback's first and last characters (a Java stack names the failing frame first, a Python
# traceback its failing line last); the stored text is bounded by the parser. Small: the agent
# reads up to 100 tests a page into a local model's context.
TRACEBACK_HEAD_CHARS = 400
TRACEBACK_TAIL_CHARS = 800
_FAILING = (TestStatus.FAILED, TestStatus.ERROR)


def last_attempts(release: Release) -> QuerySet[TestCase]:
    """Each test's last attempt, with `attempts` and `failed_attempts` of the test."""
    same_test = TestCase.objects.filter(
        release=release,
        suite=OuterRef("suite"),
        classname=OuterRef("classname"),
        name=OuterRef("name"),
        # Each invocation of a test is a test of its own (TestNG's data-driven tests).
        invocation=OuterRef("invocation"),
    )
    last = same_test.order_by("-attempt").values("attempt")[:1]

    def counted(rows: QuerySet[TestCase]) -> Subquery:
        return Subquery(
            rows.order_by().values("release").annotate(n=Count("pk")).values("n")[:1],
            output_field=IntegerField(),
        )

    return (
        TestCase.objects.filter(release=release, attempt=Subquery(last))
        .annotate(
            attempts=counted(same_test),
            failed_attempts=counted(same_test.filter(status__in=_FAILING)),
        )
        .annotate(
            outcome=Case(
                When(status__in=_FAILING, then=0),
                When(Q(status=TestStatus.FLAKY) | Q(failed_attempts__gt=0), then=1),
                When(status=TestStatus.SKIPPED, then=3),
                default=2,
                output_field=IntegerField(),
            )
        )
    )


def test_details(
    release: Release, *, status: str, name_contains: str, page: PageBounds
) -> dict[str, Any]:
    rows = last_attempts(release)
    if status:
        rows = rows.filter(outcome=STATUSES.index(status))
    if name_contains:
        rows = rows.filter(
            Q(name__icontains=name_contains)
            | Q(classname__icontains=name_contains)
            | Q(file__icontains=name_contains)
        )
    total = rows.count()
    tests = list(
        rows.order_by("outcome", "suite", "classname", "name")[
            page.offset : page.offset + page.limit
        ]
    )
    histories, looked_at = histories_of(
        release, [_label(t) for t in tests], verdicts.settings_of(verdicts.current_policy())
    )
    _with_earlier_failures(release, tests)
    items = [_entry(test, histories.get(_label(test)), looked_at) for test in tests]
    counts = dict.fromkeys(STATUSES, 0)
    for outcome, n in (
        last_attempts(release).order_by().values_list("outcome").annotate(n=Count("pk"))
    ):
        counts[STATUSES[outcome]] = n
    return {
        "release_id": release.version,
        "filters": {"status": status or None, "name_contains": name_contains or None},
        "counts": counts,
        **page.frame(total, items),
        "tests": items,
    }


def histories_of(
    release: Release, labels: Iterable[str], cfg: PolicySettings
) -> tuple[dict[str, dict[str, Any]], int]:
    """Each labelled test's history as the page shows it, and how many earlier releases were
    looked at."""
    refs = earlier(release, cfg.history_releases)
    found, _ = test_histories(release, window=cfg.history_releases, labels=list(labels), refs=refs)
    return {h.label: _history(h, len(refs), cfg) for h in found}, len(refs)


def _history(test: TestHistory, looked_at: int, cfg: PolicySettings) -> dict[str, Any]:
    known_flaky = is_known_flaky(test, cfg)
    return {
        "releases_looked_at": looked_at,
        "ran_in": test.recent_releases,
        "failed_in_last_releases": test.failed_in_recent,
        "failed_in": list(test.failed_in_versions),
        "flaky_in_last_releases": test.flaky_in_recent,
        "first_failed_in": test.first_failed_in,
        "failed_before": test.failed_before,
        "known_flaky": known_flaky,
        # Failing now, and never before in the service.
        "new_failure": test.failed_here and not test.failed_before,
    }


def _with_earlier_failures(release: Release, tests: list[TestCase]) -> None:
    """A test that passed on a rerun has no failure of its own: it shows its last failed
    attempt's (one query for the page)."""
    passed_after = {
        (t.suite, t.classname, t.name, t.invocation): t
        for t in tests
        if t.failed_attempts and not (t.failure_type or t.failure_message)  # type: ignore[attr-defined]
    }
    if not passed_after:
        return
    failures = (
        TestCase.objects.filter(
            release=release,
            status__in=(*_FAILING, TestStatus.FLAKY),
            name__in={key[2] for key in passed_after},
        )
        .exclude(failure_type="", failure_message="")
        .order_by("attempt")
        .values_list(
            "suite",
            "classname",
            "name",
            "invocation",
            "failure_type",
            "failure_message",
            "traceback",
        )
    )
    for suite, classname, name, invocation, failure_type, message, traceback in failures:
        test = passed_after.get((suite, classname, name, invocation))
        if test is not None:  # the last failure wins
            test.failure_type, test.failure_message = failure_type, message
            test.traceback = traceback


def _bounded_traceback(text: str) -> str:
    if len(text) <= TRACEBACK_HEAD_CHARS + TRACEBACK_TAIL_CHARS:
        return text
    cut = len(text) - TRACEBACK_HEAD_CHARS - TRACEBACK_TAIL_CHARS
    return (
        f"{text[:TRACEBACK_HEAD_CHARS]}\n[... {cut:,} characters cut ...]\n"
        f"{text[-TRACEBACK_TAIL_CHARS:]}"
    )


def _label(test: TestCase) -> str:
    # As sources.history labels a test.
    return f"{test.classname}::{test.name}" if test.classname else test.name


def _entry(test: TestCase, history: dict[str, Any] | None, looked_at: int) -> dict[str, Any]:
    status = STATUSES[test.outcome]  # type: ignore[attr-defined]
    message = test.failure_message or ""
    entry: dict[str, Any] = {
        "name": test.name,
        "classname": test.classname,
        "suite": test.suite,
        "file": test.file,
        "status": status,
        "last_attempt_status": test.status,
        "attempts": test.attempts,  # type: ignore[attr-defined]
        "failed_attempts": test.failed_attempts,  # type: ignore[attr-defined]
        "duration_s": test.duration,
    }
    if test.failure_type or message:
        entry["failure_type"] = test.failure_type[:200]
        entry["failure_message"] = message[:MAX_MESSAGE_CHARS]
        if len(message) > MAX_MESSAGE_CHARS:
            entry["failure_message_cut"] = (
                f"cut to {MAX_MESSAGE_CHARS} of {len(message):,} characters"
            )
    if test.traceback:
        entry["traceback"] = _bounded_traceback(test.traceback)
    if test.invocation > 1:
        entry["invocation"] = test.invocation
    entry["history"] = history or {"releases_looked_at": looked_at, "ran_in": 0}
    return entry
