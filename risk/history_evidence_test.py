"""The history's sentences as a report's findings: the small model copies the policy's
evidence, and the grounding and claim checks must find every figure of it in the data."""

from __future__ import annotations

from typing import Any

import pytest

from risk.digest import digest
from risk.filing import decide
from risk.history import (
    AuthorFacts,
    ChangeFacts,
    FileChange,
    History,
    MetricSeries,
    TestHistory,
)
from risk.policy import PolicySettings, evaluate

CFG = PolicySettings()
FLAKY = "checkout.CartTest::test_totals_round"
NEW = "payments.RefundTest::test_partial_refund"


def spread(centre: float, n: int, width: float) -> tuple[float, ...]:
    return tuple(centre + width * ((i * 7) % 11 - 5) / 5 for i in range(n))


def flaky_test() -> TestHistory:
    went = ("failed", "passed", "failed", "passed", "flaky", "passed", "failed", "passed")
    return TestHistory(
        label=FLAKY,
        file="tests/cart/test_totals.py",
        suite="cart",
        outcome="failed",
        flaky_here=False,
        first_failed_in="v1.2.0",
        failed_before=True,
        recent=tuple((f"v1.{9 - i}.0", o) for i, o in enumerate(went)),  # type: ignore[misc]
    )


def new_test() -> TestHistory:
    return TestHistory(
        label=NEW,
        file="tests/payments/test_refund.py",
        suite="payments",
        outcome="failed",
        flaky_here=False,
        first_failed_in="v2.0.0",
        recent=tuple((f"v1.{9 - i}.0", "passed") for i in range(10)),
    )


CHANGES = ChangeFacts(
    commits=4,
    files=(
        *(FileChange(f"src/auth/mod{i}.py", 60, 15) for i in range(40)),
        FileChange("db/migrations/0042_drop_legacy_status.sql", 12, 0),
    ),
    messages=("chore: drop orders.legacy_status\n\nALTER TABLE orders DROP COLUMN",),
    authors=(
        AuthorFacts(
            "Bob",
            4,
            ("db/migrations/0042_drop_legacy_status.sql",),
            ("db/migrations/0042_drop_legacy_status.sql",),
            ("db/migrations",),
            0,
        ),
    ),
    service_has_earlier_commits=True,
)

HISTORIES = {
    "known flaky": History(
        service="checkout", version="v2.0.0", tests=(flaky_test(),), has_test_detail=True
    ),
    "new beside known flaky": History(
        service="checkout",
        version="v2.0.0",
        tests=(flaky_test(), new_test()),
        has_test_detail=True,
    ),
    "large change": History(service="checkout", version="v2.0.0", changes=CHANGES),
    "p95 doubled": History(
        service="checkout",
        version="v2.0.0",
        metrics=(MetricSeries("response_time_p95", spread(910, 60, 40), spread(420, 60, 20)),),
    ),
    "error rate against the recent releases": History(
        service="checkout",
        version="v2.0.0",
        metrics=(
            MetricSeries(
                "error_rate",
                spread(0.015, 30, 0.002),
                recent=(("v1.9.0", spread(0.001, 30, 0.0002)),),
            ),
        ),
    ),
    "p95 normal for the service": History(
        service="checkout",
        version="v2.0.0",
        metrics=(MetricSeries("response_time_p95", spread(910, 60, 40), spread(905, 60, 40)),),
    ),
    "a failure that came back": History(
        service="checkout",
        version="v2.0.0",
        tests=(
            TestHistory(
                label="search.IndexTest::test_case_insensitive",
                file="tests/search/test_index.py",
                suite="search",
                outcome="failed",
                flaky_here=False,
                first_failed_in="v1.4.0",
                failed_before=True,
                recent=(("v1.9.0", "passed"), ("v1.8.0", "passed"), ("v1.7.0", "failed")),
            ),
        ),
        has_test_detail=True,
    ),
    "a failure that persists": History(
        service="checkout",
        version="v2.0.0",
        tests=(
            TestHistory(
                label="search.IndexTest::test_accents",
                file="",
                suite="search",
                outcome="failed",
                flaky_here=False,
                first_failed_in="v1.7.0",
                failed_before=True,
                recent=(("v1.9.0", "failed"), ("v1.8.0", "failed"), ("v1.7.0", "failed")),
            ),
        ),
        has_test_detail=True,
    ),
    "too little data": History(
        service="checkout",
        version="v2.0.0",
        metrics=(MetricSeries("response_time_p95", spread(910, 8, 40), spread(420, 60, 20)),),
    ),
}


def data(failing: list[str]) -> dict[str, Any]:
    return {
        "changes": ["Refactor the totals", "Drop the legacy status"],
        "tests": {"passed": 400, "failed": len(failing), "skipped": 3, "failing_tests": failing},
        "deployment_metrics": {"error_rate": 0.015, "response_time_p95": 910},
    }


@pytest.mark.parametrize("case", list(HISTORIES))
def test_a_report_of_the_evidence_is_grounded(case: str) -> None:
    history = HISTORIES[case]
    release = data([t.label for t in history.failing()])
    verdict = evaluate(release, CFG, history=history)
    evidence = verdict.evidence()
    assert evidence
    decision = decide(
        severity=verdict.severity,
        findings=evidence,
        summary="",
        data=release,
        verdict=verdict,
        cfg=CFG,
        refused_before=False,
        shown=digest(release, verdict, version=1, cfg=CFG, history=history),
    )
    assert not decision.refused, decision.problems
    assert decision.grounding.problems() == []


def test_the_evidence_cites_the_history() -> None:
    history = HISTORIES["new beside known flaky"]
    verdict = evaluate(data([FLAKY, NEW]), CFG, history=history)
    evidence = " | ".join(verdict.evidence())
    assert f"{FLAKY} failed in 4 of the last 8 releases of checkout and failed and passed " in (
        evidence
    )
    assert f"{NEW} failed for the first time in checkout, after passing in the last 10" in evidence
    # The new failure's name says payments, but no change of the release lies there and no
    # suspect was computed: a new failure (medium), not a critical area's (high).
    assert verdict.severity == "medium"


def test_too_little_data_sends_the_report_to_a_person() -> None:
    history = HISTORIES["too little data"]
    release = data([])
    verdict = evaluate(release, CFG, history=history)
    decision = decide(
        severity=verdict.severity,
        findings=verdict.evidence(),
        summary="",
        data=release,
        verdict=verdict,
        cfg=CFG,
        refused_before=False,
    )
    assert not decision.refused and decision.needs_review
    assert "8 samples in this release" in decision.review_reasons[0]


def test_the_digest_names_the_drilldowns_with_something_to_show() -> None:
    history = HISTORIES["new beside known flaky"]
    release = data([FLAKY, NEW])
    shown = digest(release, evaluate(release, CFG, history=history), version=1, history=history)
    assert shown["drilldowns"] == {
        "get_test_details": "2 failed tests, with their history in checkout: details available"
    }
    assert list(shown)[-2:] == ["drilldowns", "policy"]
    bare = digest(release, evaluate(release, CFG), version=1, history=History.empty())
    assert "drilldowns" not in bare


@pytest.mark.parametrize(
    ("finding", "grounded"),
    [
        (f"{FLAKY} failed in 4 of the last 8 releases (known flaky)", True),
        (f"{FLAKY} is flaky: it failed in 7 of the last 8 releases", False),
        (f"{NEW} failed for the first time, after passing in the last 10 releases", True),
        (f"{NEW} failed for the first time, after passing in the last 12 releases", False),
    ],
)
def test_a_made_up_history_figure_is_caught(finding: str, grounded: bool) -> None:
    history = HISTORIES["new beside known flaky"]
    release = data([FLAKY, NEW])
    verdict = evaluate(release, CFG, history=history)
    decision = decide(
        severity=verdict.severity,
        findings=[finding],
        summary="",
        data=release,
        verdict=verdict,
        cfg=CFG,
        refused_before=False,
    )
    assert (decision.grounding.problems() == []) is grounded, decision.grounding.problems()
