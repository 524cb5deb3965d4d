"""A release's tests, one entry per test (its attempts folded), with its history in the
service: for `GET /api/releases/<version>/tests`.

A test's status is its last attempt's: failed (a failure or an error), skipped, passed, or
flaky (it passed after an attempt of the same release, so the same commit, failed). Its
history looks at the service's `HISTORY_RELEASES` releases before this one: in how many it
failed, the oldest of them it failed in, and in how many it was flaky there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, Count, IntegerField, OuterRef, Q, QuerySet, Subquery, When

from releases.models import Release
from sources.drilldown.earlier import earlier_releases
from sources.drilldown.paging import PageBounds
from sources.models import TestCase, TestStatus

STATUSES = ("failed", "flaky", "passed", "skipped")
MAX_MESSAGE_CHARS = 500
_FAILING = (TestStatus.FAILED, TestStatus.ERROR)

TestKey = tuple[str, str]  # (classname, name): a suite's name may differ between reports


@dataclass
class _Seen:
    """One test in one earlier release."""

    failed: bool = False  # its last attempt failed
    failed_once: bool = False
    passed_once: bool = False


@dataclass
class TestHistory:
    __test__ = False

    releases: list[str]  # the versions looked at, newest first
    seen: dict[str, _Seen] = field(default_factory=dict)

    def as_dict(self, failing_now: bool) -> dict[str, Any]:
        failed_in = [v for v in self.releases if v in self.seen and self.seen[v].failed]
        flaky_in = [
            v
            for v in self.releases
            if v in self.seen and self.seen[v].failed_once and self.seen[v].passed_once
        ]
        return {
            "releases_looked_at": len(self.releases),
            "ran_in": sum(v in self.seen for v in self.releases),
            "failed_in_last_releases": len(failed_in),
            "first_failed_in": failed_in[-1] if failed_in else None,
            "flaky_in_last_releases": len(flaky_in),
            # Failing now and in none of the releases before: a new failure.
            "new_failure": failing_now and not failed_in,
            "known_flaky": bool(flaky_in) or len(failed_in) >= 2,
        }


def last_attempts(release: Release) -> QuerySet[TestCase]:
    """Each test's last attempt, with `attempts` and `failed_attempts` of the test."""
    same_test = TestCase.objects.filter(
        release=release,
        suite=OuterRef("suite"),
        classname=OuterRef("classname"),
        name=OuterRef("name"),
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
    histories = histories_of(release, [(t.classname, t.name) for t in tests])
    _with_earlier_failures(release, tests)
    items = [_entry(test, histories[(test.classname, test.name)]) for test in tests]
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


def histories_of(release: Release, keys: Iterable[TestKey]) -> dict[TestKey, TestHistory]:
    keys = list(keys)
    earlier = earlier_releases(release)
    versions = {r.pk: r.version for r in earlier}
    histories = {key: TestHistory([r.version for r in earlier]) for key in keys}
    if not keys or not earlier:
        return histories
    rows = (
        TestCase.objects.filter(
            release_id__in=versions,
            classname__in={k[0] for k in keys},
            name__in={k[1] for k in keys},
        )
        .order_by("release_id", "classname", "name", "attempt")
        .values_list("release_id", "classname", "name", "status")
    )
    by_release: dict[tuple[TestKey, str], _Seen] = defaultdict(_Seen)
    for release_id, classname, name, test_status in rows:
        key = (classname, name)
        if key not in histories:
            continue
        seen = by_release[(key, versions[release_id])]
        failing = test_status in _FAILING
        seen.failed = failing
        seen.failed_once = seen.failed_once or failing
        seen.passed_once = seen.passed_once or test_status in (
            TestStatus.PASSED,
            TestStatus.FLAKY,
        )
        if test_status == TestStatus.FLAKY:
            seen.failed_once = True
    for (key, version), seen in by_release.items():
        histories[key].seen[version] = seen
    return histories


def _with_earlier_failures(release: Release, tests: list[TestCase]) -> None:
    """A test that passed on a rerun has no failure of its own: it shows its last failed
    attempt's (one query for the page)."""
    passed_after = {
        (t.suite, t.classname, t.name): t
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
        .values_list("suite", "classname", "name", "failure_type", "failure_message")
    )
    for suite, classname, name, failure_type, message in failures:
        test = passed_after.get((suite, classname, name))
        if test is not None:  # the last failure wins
            test.failure_type, test.failure_message = failure_type, message


def _entry(test: TestCase, history: TestHistory) -> dict[str, Any]:
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
    entry["history"] = history.as_dict(failing_now=status == "failed")
    return entry
