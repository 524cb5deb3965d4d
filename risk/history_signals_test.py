"""The history-aware signals at their boundaries, alone and through the policy's verdict."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from risk.history import (
    AuthorFacts,
    ChangeFacts,
    FileChange,
    History,
    MetricSeries,
    TestHistory,
    TestOutcome,
)
from risk.history_signals import classify_failures, correlated_paths, is_known_flaky
from risk.policy import PolicySettings, PolicyVerdict, evaluate
from risk.suspects import ON_PATH, Suspect

CFG = PolicySettings()
PAY = "checkout.PaymentTest::test_refund"
CART = "catalog.SearchTest::test_sorting"


def test_history(
    label: str = CART,
    *,
    outcome: TestOutcome = "failed",
    recent: str = "",
    flaky_here: bool = False,
    failed_before: bool | None = None,
    file: str = "",
) -> TestHistory:
    """`recent` reads most recent first: F failed, P passed, K flaky, S skipped."""
    word: dict[str, TestOutcome] = {"F": "failed", "P": "passed", "K": "flaky", "S": "skipped"}
    went = tuple((f"v1.{i}.0", word[c]) for i, c in enumerate(recent))
    before = any(c in "FK" for c in recent) if failed_before is None else failed_before
    return TestHistory(
        label=label,
        file=file,
        suite="",
        outcome=outcome,
        flaky_here=flaky_here,
        first_failed_in="v1.0.0" if before else "v2.0.0",
        failed_before=before,
        recent=went,
    )


test_history.__test__ = False  # type: ignore[attr-defined]


def history(
    *tests: TestHistory,
    changes: ChangeFacts | None = None,
    metrics: tuple[MetricSeries, ...] = (),
) -> History:
    return History(
        service="checkout",
        version="v2.0.0",
        tests=tests,
        changes=changes,
        metrics=metrics,
        has_test_detail=bool(tests),
    )


def summary(*failing: str, changes: list[str] | None = None, **metrics: Any) -> dict[str, Any]:
    return {
        "changes": changes or ["Copy fixes on the receipt page"],
        "tests": {"passed": 100, "failed": len(failing), "skipped": 0, "failing_tests": failing},
        "deployment_metrics": {"error_rate": 0.001, "response_time_p95": 300, **metrics},
    }


def names(verdict: PolicyVerdict) -> dict[str, str]:
    return {s.name: s.level for s in verdict.signals}


def detail(verdict: PolicyVerdict, name: str) -> str:
    return next(s.detail for s in verdict.signals if s.name == name)


@pytest.mark.parametrize(
    ("test", "runs_needed", "flaky"),
    [
        (test_history(flaky_here=True), 2, True),  # failed and passed here
        (test_history(recent="PKPP"), 2, True),  # failed and passed in one recent release
        (test_history(recent="FPF"), 2, True),  # on and off: two stretches
        (test_history(recent="FPF"), 3, False),  # ... but three are asked for
        (test_history(recent="FFPPP"), 2, False),  # one stretch: a failure, then fixed
        (test_history(recent="PPPP"), 2, False),  # never failed: new
        (test_history(recent=""), 2, False),  # no history at all
    ],
)
def test_known_flaky(test: TestHistory, runs_needed: int, flaky: bool) -> None:
    cfg = PolicySettings(known_flaky_failure_runs_at_or_above=runs_needed)
    assert is_known_flaky(test, cfg) is flaky


@pytest.mark.parametrize(
    ("tests", "severity", "levels"),
    [
        # A known-flaky failure alone, even in payments, does not make a release high.
        ([test_history(PAY, recent="FPFPPPPPPP")], "low", {"known_flaky_failures": "low"}),
        ([test_history(CART, flaky_here=True)], "low", {"failed_tests": "low"}),
        # A new failure named after a critical area, with no change there: a new failure.
        ([test_history(PAY, recent="PPPP")], "medium", {"new_failures": "medium"}),
        # Known flaky beside a new one: the new one counts.
        (
            [test_history(CART, recent="FPF"), test_history(PAY, recent="PP")],
            "medium",
            {"new_failures": "medium", "known_flaky_failures": "low"},
        ),
        # A failure that was fixed and comes back is not flaky.
        ([test_history(CART, recent="PPPFF")], "medium", {"new_failures": "medium"}),
    ],
)
def test_known_flaky_against_new_failures(
    tests: list[TestHistory], severity: str, levels: dict[str, str]
) -> None:
    verdict = evaluate(summary(*(t.label for t in tests)), CFG, history=history(*tests))
    assert verdict.severity == severity
    assert levels.items() <= names(verdict).items()


def _suspect(path: str) -> Suspect:
    return Suspect("9" * 40, "Round refunds", "Ada", ON_PATH, path, 12, 0, "runs through")


@pytest.mark.parametrize(
    ("failing", "changes", "severity", "raised", "not_raised"),
    [
        # No suspects computed (no changed lines ingested): a change of the release in the
        # area the failing test's name names backs it; the name alone does not.
        (
            test_history(PAY, recent="PPPP"), ["Copy fixes"], "medium", set(),
            {"critical_area_failures"},
        ),
        (
            test_history(PAY, recent="PPPP"), ["Round refunds in payment capture"], "high",
            {"critical_area_failures"}, set(),
        ),
        # Suspects computed: the first suspect's path decides, in the suspect's own signal.
        (
            dataclasses.replace(
                test_history(CART, recent="PPPP"), suspects=(_suspect("payments/refund.py"),),
                suspects_computed=True,
            ),
            ["Copy fixes"], "high", {"suspect_in_critical_area"}, {"critical_area_failures"},
        ),
        (
            dataclasses.replace(
                test_history(PAY, recent="PPPP"), suspects=(_suspect("web/receipt.py"),),
                suspects_computed=True,
            ),
            ["Copy fixes"], "medium", set(),
            {"critical_area_failures", "suspect_in_critical_area"},
        ),
        # Computed and none found, with a change in payments: not a critical area's failure,
        # but the payments change is still paired with it (the ranking may not have seen its
        # code), as without suspects.
        (
            dataclasses.replace(test_history(PAY, recent="PPPP"), suspects_computed=True),
            ["Round refunds in payment capture"], "high", {"risky_changes_with_failures"},
            {"critical_area_failures", "suspect_in_critical_area"},
        ),
        # Its suspect is elsewhere: a payments change beside it is not its cause.
        (
            dataclasses.replace(
                test_history(CART, recent="PPPP"), suspects=(_suspect("web/receipt.py"),),
                suspects_computed=True,
            ),
            ["Round refunds in payment capture"], "medium", set(),
            {"critical_area_failures", "suspect_in_critical_area", "risky_changes_with_failures"},
        ),
        # Not computed (no changed lines): the payments change and the failure are paired.
        (
            test_history(CART, recent="PPPP"), ["Round refunds in payment capture"], "high",
            {"risky_changes_with_failures"}, set(),
        ),
        # A known-flaky failure with no suspect on its path raises nothing of an area.
        (
            dataclasses.replace(
                test_history(PAY, recent="FPFPPPPPPP"), suspects_computed=True
            ),
            ["Copy fixes"], "low", set(),
            {"critical_area_failures", "suspect_in_critical_area"},
        ),
    ],
)  # fmt: skip
def test_a_critical_area_failure_needs_evidence(
    failing: TestHistory,
    changes: list[str],
    severity: str,
    raised: set[str],
    not_raised: set[str],
) -> None:
    verdict = evaluate(summary(failing.label, changes=changes), CFG, history=history(failing))
    got = {s.name for s in verdict.raised()}
    assert verdict.severity == severity, got
    assert raised <= got and not (not_raised & got)


def test_the_sentences_cite_the_history() -> None:
    flaky = test_history(PAY, recent="FPFPPPPPPP")
    new = test_history(CART, recent="PPP")
    back = test_history("checkout.TaxTest::test_vat", recent="PPF")
    verdict = evaluate(summary(PAY, CART, back.label), CFG, history=history(flaky, new, back))
    assert detail(verdict, "known_flaky_failures") == (
        f"{PAY} failed in 2 of the last 10 releases of checkout (known flaky)"
    )
    text = detail(verdict, "new_failures")
    assert f"{CART} failed for the first time in checkout, after passing in the last 3 " in text
    assert (
        "checkout.TaxTest::test_vat fails again after passing in the last 2 releases; it first "
        "failed in v1.0.0 (a failure that came back)"
    ) in text
    assert "(1 of them known flaky)" in detail(verdict, "failed_tests")
    assert any("known flaky" in sentence for sentence in verdict.evidence())


def test_what_failures_share_is_said_once() -> None:
    tests = [
        test_history(f"payments.RefundTest::test_{name}", recent="PPPP", file="tests/payments/r.py")
        for name in ("partial", "jpy", "usd", "eur")
    ]
    past = history(*tests, changes=CHANGED_PAYMENTS)

    verdict = evaluate(summary(*(t.label for t in tests)), CFG, history=past)

    # Every failing test is new and beside the same file: the failed-tests sentence names
    # them, these two say so by their count (a report lists each failing test once).
    assert detail(verdict, "new_failures") == (
        "All 4 failing tests failed for the first time in checkout, after "
        "passing in the last 4 releases (new failures)"
    )
    assert detail(verdict, "correlated_failures") == (
        "All 4 failing tests fail beside changed code: src/payments/refunds.py"
    )
    named = [s for s in verdict.evidence() if "test_partial" in s]
    assert len(named) == 1, named


def test_some_of_the_failures_are_still_named() -> None:
    fresh = [test_history(f"payments.RefundTest::test_{n}", recent="PP") for n in ("a", "b")]
    back = test_history("checkout.TaxTest::test_vat", recent="PPF")
    verdict = evaluate(
        summary(*(t.label for t in [*fresh, back])), CFG, history=history(*fresh, back)
    )
    assert detail(verdict, "new_failures").startswith(
        "payments.RefundTest::test_a and payments.RefundTest::test_b failed for the first time"
    )


def skipped_test(label: str, *, recent: str = "PPP", file: str = "") -> TestHistory:
    return dataclasses.replace(test_history(label, recent=recent, file=file), outcome="skipped")


def test_tests_newly_skipped_in_bulk_are_said_with_their_area() -> None:
    skipped = [
        skipped_test(f"payments.GatewayTest::test_{i}", file="tests/payments/test_gateway.py")
        for i in range(8)
    ]
    always = skipped_test("catalog.SearchTest::test_slow", recent="PSP")
    verdict = evaluate(summary(), CFG, history=history(*skipped, always))

    signal = next(s for s in verdict.signals if s.name == "newly_skipped")
    assert signal.level == "medium" and signal.figure == 8 and signal.areas == ("payments",)
    assert signal.detail.startswith(
        "8 tests of payments newly skipped (they ran in the recent releases of checkout, "
        "skipped in none): payments.GatewayTest::test_0, "
    )
    assert "test_slow" not in signal.detail  # it was skipped before
    assert verdict.severity == "medium"
    assert signal.detail in verdict.evidence()


def test_a_few_tests_newly_skipped_outside_a_critical_area_are_low_but_said() -> None:
    verdict = evaluate(
        summary(), CFG, history=history(skipped_test("catalog.SearchTest::test_slow"))
    )
    signal = next(s for s in verdict.signals if s.name == "newly_skipped")
    assert signal.level == "low" and "1 test of catalog.SearchTest newly skipped" in signal.detail
    assert verdict.severity == "low"


def test_a_test_newly_flaky_is_said_with_its_area_and_a_known_one_is_not() -> None:
    # Surefire's flakyFailure: failed, then passed on a rerun, in this release.
    new = test_history(PAY, outcome="flaky", flaky_here=True, recent="PPPP")
    old = test_history(CART, outcome="flaky", flaky_here=True, recent="PKPP")
    verdict = evaluate(summary(changes=["Fix the failing build"]), CFG, history=history(new, old))

    signal = next(s for s in verdict.signals if s.name == "newly_flaky")
    assert signal.figure == 1
    assert signal.detail == (
        "1 test failed and passed on a rerun in this release, for the first time in the last 4 "
        f"releases of checkout (newly flaky): {PAY} (in payments)"
    )
    assert signal.detail in verdict.evidence()


CHANGED_PAYMENTS = ChangeFacts(
    commits=1, files=(FileChange("src/payments/refunds.py", 40, 3),), authors=()
)


@pytest.mark.parametrize(
    ("test", "paths"),
    [
        (test_history(PAY, file="tests/payments/test_refund.py"), ["src/payments/refunds.py"]),
        (test_history("RefundsTest::test_partial"), ["src/payments/refunds.py"]),
        (test_history(CART, file="tests/catalog/test_sorting.py"), []),
    ],
)
def test_correlation_by_directory_module_or_class(test: TestHistory, paths: list[str]) -> None:
    assert correlated_paths(test, CHANGED_PAYMENTS) == paths


def test_correlation_by_critical_area() -> None:
    billing = ChangeFacts(commits=1, files=(FileChange("src/billing/invoice.py", 5, 1),))
    test = test_history("checkout.CardTest::test_3ds_challenge")
    assert correlated_paths(test, billing) == []
    assert correlated_paths(test, billing, CFG) == ["src/billing/invoice.py"]
    search = ChangeFacts(commits=1, files=(FileChange("src/search/rank.py", 5, 1),))
    assert correlated_paths(test, search, CFG) == []


def test_a_known_flaky_test_beside_changed_code_is_not_excused() -> None:
    flaky = test_history(PAY, recent="FPFP", file="tests/payments/test_refund.py")
    past = history(flaky, changes=CHANGED_PAYMENTS)
    assert classify_failures(past, CFG).excused == frozenset()
    verdict = evaluate(summary(PAY), CFG, history=past)
    assert verdict.severity == "high"
    assert detail(verdict, "correlated_failures") == (
        f"{PAY} fails beside changed code: src/payments/refunds.py"
    )


def change(lines: int = 10, files: int = 1, dirs: int = 1) -> ChangeFacts:
    per_file = lines // files
    made = tuple(
        FileChange(f"src/d{i % dirs}/f{i}.py", per_file + (lines % files if i == 0 else 0), 0)
        for i in range(files)
    )
    return ChangeFacts(commits=1, files=made)


@pytest.mark.parametrize(
    ("facts", "level"),
    [
        # Without earlier releases: said (low) from 1,000 lines, large from 4,000
        # (risk/change_signals_test.py has the rule itself).
        (change(lines=999), "none"),
        (change(lines=1000), "low"),
        (change(lines=3999), "low"),
        (change(lines=4000), "medium"),
        (change(files=29), "none"),
        (change(files=30), "medium"),
        (change(files=10, dirs=9), "none"),
        (change(files=10, dirs=10), "medium"),
    ],
)
def test_change_size_boundaries(facts: ChangeFacts, level: str) -> None:
    verdict = evaluate(summary(), CFG, history=history(changes=facts))
    assert names(verdict)["change_size"] == level


def test_the_change_sentence_has_kameis_figures() -> None:
    facts = ChangeFacts(
        commits=3,
        files=(
            FileChange("src/auth/login.py", 1500, 500),
            FileChange("db/migrations/0042_users.sql", 900, 100),
        ),
    )
    verdict = evaluate(summary(), CFG, history=history(changes=facts))
    assert detail(verdict, "change_size") == (
        "The change: 3,000 lines of code (2,400 added, 600 deleted) in 2 files, 2 directories "
        "and 2 subsystems, spread evenly (entropy 0.92 of 1); 3,000 lines of code, at or above "
        "the 1,000 that make a change large for a service with a history of its own, but the "
        "service has no earlier release, too few to judge its size against: large from 4,000"
    )
    assert names(verdict)["critical_paths"] == "medium"
    assert "auth: src/auth/login.py" in detail(verdict, "critical_paths")
    assert "migrations: db/migrations/0042_users.sql" in detail(verdict, "critical_paths")


def authored(*paths: str, earlier: bool = True) -> ChangeFacts:
    return ChangeFacts(
        commits=1,
        files=tuple(FileChange(p, 5, 1) for p in paths),
        authors=(AuthorFacts("Bob", 1, paths, paths, ("x",), 0),),
        service_has_earlier_commits=earlier,
    )


@pytest.mark.parametrize(
    ("facts", "level"),
    [
        (authored("docs/guide.md"), "low"),
        (authored("src/auth/session.py"), "medium"),
        # A service without earlier commits has no one to be new against.
        (authored("src/auth/session.py", earlier=False), None),
    ],
)
def test_authors_new_to_their_files(facts: ChangeFacts, level: str | None) -> None:
    verdict = evaluate(summary(), CFG, history=history(changes=facts))
    assert names(verdict).get("new_authors") == level


def samples(centre: float, n: int, spread: float = 10.0) -> tuple[float, ...]:
    return tuple(centre + spread * ((i * 7) % 11 - 5) / 5 for i in range(n))


@pytest.mark.parametrize(
    ("series", "level", "needs_review"),
    [
        # p95 doubled against its baseline window: a regression.
        (MetricSeries("response_time_p95", samples(900, 60), samples(420, 60)), "medium", False),
        # The same, against the recent releases when there is no baseline window.
        (
            MetricSeries(
                "response_time_p95",
                samples(900, 30),
                recent=(("v1.9.0", samples(420, 30)), ("v1.8.0", samples(430, 30))),
            ),
            "medium",
            False,
        ),
        # 900 ms is normal for this service.
        (MetricSeries("response_time_p95", samples(900, 60), samples(890, 60)), "none", False),
        # The error rate is critical: its regression vetoes.
        (
            MetricSeries("error_rate", samples(0.015, 40, 0.001), samples(0.001, 40, 0.0002)),
            "high",
            False,
        ),
        # Too little data is never a pass: a person looks.
        (MetricSeries("response_time_p95", samples(900, 5), samples(420, 60)), "medium", True),
        (MetricSeries("response_time_p95", samples(900, 60)), "medium", True),
    ],
)
def test_the_metric_judge_as_a_signal(series: MetricSeries, level: str, needs_review: bool) -> None:
    verdict = evaluate(summary(), CFG, history=history(metrics=(series,)))
    signal = next(s for s in verdict.signals if s.name == "metric_judge")
    assert (signal.level, signal.needs_review) == (level, needs_review)
    assert signal.counts_as == level
    if needs_review:
        assert signal.detail in verdict.evidence()


def test_the_metric_sentence_explains_the_judgement() -> None:
    series = MetricSeries("response_time_p95", samples(910, 60), samples(420, 60))
    verdict = evaluate(summary(), CFG, history=history(metrics=(series,)))
    assert detail(verdict, "metric_judge") == (
        "p95 latency rose from a median of 420 ms to 910 ms over 60 samples each "
        "(Mann-Whitney p < 0.001), 2.2 times the baseline, above the 1.5 times allowed."
    )
    assert detail(verdict, "metric_judge") in verdict.evidence()


@pytest.mark.parametrize(
    "series",
    [
        MetricSeries("queue_depth", samples(900, 60), samples(10, 60)),  # no settings
        MetricSeries("response_time_p95", (900.0,), (420.0,)),  # a snapshot, not a series
    ],
)
def test_what_the_judge_leaves_to_the_summary(series: MetricSeries) -> None:
    verdict = evaluate(summary(), CFG, history=history(metrics=(series,)))
    assert "metric_judge" not in names(verdict)


@pytest.mark.parametrize(
    "data",
    [
        summary(),
        summary(PAY, changes=["Upgraded the primary database"]),
        summary(CART, response_time_p95_baseline=200),
        {"changes": None, "tests": None, "deployment_metrics": None},
    ],
)
def test_an_empty_history_changes_nothing(data: dict[str, Any]) -> None:
    assert evaluate(data, CFG, history=History.empty()) == evaluate(data, CFG)


def test_failures_beside_changed_code_name_code_never_ci_docs_or_lock_files() -> None:
    # itsdangerous 2.2.0 with a bug put into timed.py: the sentence named the CI workflow and
    # the requirements file first and hid timed.py among "8 more".
    test = TestHistory(
        label="tests.test_timed.TestTimedSerializer::test_max_age",
        file="tests/test_timed.py",
        suite="pytest",
        outcome="failed",
        flaky_here=False,
    )
    facts = ChangeFacts(
        commits=4,
        files=tuple(
            FileChange(path, 3, 1)
            for path in (
                ".github/workflows/tests.yaml",
                "requirements/tests.txt",
                "docs/timed.rst",
                "tests/test_timed.py",
                "src/itsdangerous/serializer.py",
                "src/itsdangerous/timed.py",
            )
        ),
    )
    assert correlated_paths(test, facts, CFG) == ["src/itsdangerous/timed.py"]


def test_risky_changes_pair_only_with_failures_whose_suspects_are_not_known() -> None:
    ranked = dataclasses.replace(
        test_history(CART, recent="PPPP"),
        suspects=(_suspect("web/receipt.py"),),
        suspects_computed=True,
    )
    unranked = test_history("checkout.TaxTest::test_vat", recent="PPPP")
    verdict = evaluate(
        summary(ranked.label, unranked.label, changes=["Round refunds in payment capture"]),
        CFG,
        history=history(ranked, unranked),
    )
    text = detail(verdict, "risky_changes_with_failures")
    assert text.endswith("failing tests with no ranked suspect: checkout.TaxTest::test_vat")
    assert CART not in text


# ---- what the history follows and no label shows (issue 40) ---------------------------------


def _new_failures(verdict: PolicyVerdict) -> str:
    return next(s.detail for s in verdict.signals if s.name == "new_failures")


def test_a_test_file_renamed_in_the_release_is_said() -> None:
    moved = dataclasses.replace(
        test_history("shipping.test_rates::test_free", recent="PPPP"),
        renamed_from="shipping/rates_test.py",
    )
    verdict = evaluate(summary(moved.label), CFG, history=history(moved))
    assert "renamed in this release from shipping/rates_test.py" in _new_failures(verdict)
    # Without the rename nothing speaks of one.
    plain = test_history("shipping.test_rates::test_free", recent="PPPP")
    assert "renamed" not in _new_failures(
        evaluate(summary(plain.label), CFG, history=history(plain))
    )


def test_a_rerun_that_failed_every_time_is_not_excused_as_known_flaky() -> None:
    # Passed on a rerun in 2 of the last 4 releases: known flaky, when it fails once here.
    once = test_history(CART, recent="KPKP")
    assert is_known_flaky(once, CFG)
    assert evaluate(summary(CART), CFG, history=history(once)).severity == "low"
    # Failed, then failed again on both of Surefire's reruns.
    every = dataclasses.replace(once, failed_runs=3)
    assert every.failed_every_rerun and not is_known_flaky(every, CFG)
    verdict = evaluate(summary(CART), CFG, history=history(every))
    assert verdict.severity == "medium"
    assert "failed on all 3 runs in this release (its reruns failed too, where a rerun had " in (
        _new_failures(verdict)
    )
    assert "not flaky this time" in _new_failures(verdict)
    assert not any(s.name == "known_flaky_failures" for s in verdict.signals)


def test_a_rerun_that_passed_is_still_flaky() -> None:
    # Failed and passed here: failed_runs counts the failure, the pass makes it flaky.
    passed = dataclasses.replace(
        test_history(CART, outcome="flaky", recent="PP", flaky_here=True), failed_runs=1
    )
    assert not passed.failed_every_rerun and is_known_flaky(passed, CFG)


def test_errors_in_setup_are_said() -> None:
    tests = [
        dataclasses.replace(
            test_history(f"orders.history_test::test_{n}", recent="PPP"), setup_error=True
        )
        for n in ("a", "b")
    ]
    verdict = evaluate(summary(*(t.label for t in tests)), CFG, history=history(*tests))
    assert 'All 2 failing tests errored in setup ("failed on setup"): their own code never ran' in (
        _new_failures(verdict)
    )
    alone = dataclasses.replace(tests[0], setup_error=False)
    assert "setup" not in _new_failures(evaluate(summary(alone.label), CFG, history=history(alone)))


def test_a_rerun_that_failed_every_time_gets_its_suspect_sentence() -> None:
    # The "no suspect sentence for a rerun failure": excused as known flaky, its
    # suspect was never said. Not excused, its first suspect is.
    every = dataclasses.replace(
        test_history(CART, recent="KPKP"),
        failed_runs=3,
        suspects=(_suspect("catalog/search.py"),),
        suspects_computed=True,
    )
    verdict = evaluate(summary(CART), CFG, history=history(every))
    said = [s.detail for s in verdict.signals if s.name == "failure_suspects"]
    assert said and "9999999" in said[0] and "catalog/search.py" in said[0]
    once = dataclasses.replace(every, failed_runs=1)
    assert not any(
        s.name == "failure_suspects"
        for s in evaluate(summary(CART), CFG, history=history(once)).signals
    )
