"""The risk policy's signals that read a release's history (`risk.history`): known-flaky
against new failures, failures beside the code the release changed, the change's size and
spread and its authors' experience, and the metric judge.

Each is a pure function of the history and the settings, with its evidence sentence carrying
its figures ("checkout.PayTest::test_charge failed in 4 of the last 10 releases of checkout
(known flaky)"), so that the small model, which copies the policy's sentences, cites them. An
empty history gives no signal: the policy then reads the summary as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from risk.change_signals import change_signals
from risk.history import ChangeFacts, History, TestHistory
from risk.judge import Judgement, judge
from risk.settings import LEVEL_RANK, Level, PolicySettings
from risk.signal import NAMED, Signal, areas_in, path_areas, shown
from risk.signal import listed as _listed
from risk.signal import plural as _plural
from risk.suspect_signals import suspect_signals

# ---------------------------------------------------------------------------------------
# Failures: known flaky, new, back again, and beside the changed code
# ---------------------------------------------------------------------------------------


def is_known_flaky(test: TestHistory, cfg: PolicySettings) -> bool:
    """Failed and passed on the same release (here or recently), or failed in separate
    stretches of the recent releases, on and off. Never a test rerun here that failed every
    time (Surefire's rerunFailure): the rerun that excused it before did not pass it now."""
    if test.failed_every_rerun:
        return False
    return (
        test.flaky_here
        or test.flaky_in_recent > 0
        or test.failure_runs >= cfg.known_flaky_failure_runs_at_or_above
    )


_GENERIC = frozenset(
    {
        "", "test", "tests", "spec", "specs", "src", "lib", "app", "main", "java", "com", "org",
        "net", "io", "example", "internal", "pkg", "unit", "integration", "e2e", "py", "js", "ts",
    }
)  # fmt: skip
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _strip_test(word: str) -> str:
    for affix in ("test_", "_test", "tests", "test", "_spec", "spec"):
        if word.startswith(affix) and len(word) > len(affix):
            word = word[len(affix) :]
        elif word.endswith(affix) and len(word) > len(affix):
            word = word[: -len(affix)]
    return word.strip("_")


def _test_words(test: TestHistory) -> set[str]:
    """The directories, module and class a test lives in, without "test" affixes: what a
    changed file's path is matched with (tests/payments/test_gateway.py -> payments, gateway)."""
    words: set[str] = set()
    file = PurePosixPath(test.file) if test.file else None
    if file is not None:
        words |= {part.lower() for part in file.parent.parts}
        words.add(_strip_test(file.stem.lower()))
    classname, _, _ = test.label.rpartition("::")
    for part in re.split(r"[./:]", classname):
        words.add(_strip_test(_CAMEL.sub("_", part).lower()))
    return words - _GENERIC


def _path_words(path: str) -> set[str]:
    parts = PurePosixPath(path.lower())
    return ({*parts.parent.parts, parts.stem} | {_strip_test(parts.stem)}) - _GENERIC


def correlated_paths(
    test: TestHistory, changes: ChangeFacts | None, cfg: PolicySettings | None = None
) -> list[str]:
    """The changed code files a failing test shares a directory, module or class name with,
    or (with the policy's settings) a critical area: a payments test and the payment code.
    Only code and schema files: a CI workflow, a requirements file or the docs sit beside
    every test and say nothing of this one. Those named after the test's module first."""
    if changes is None:
        return []
    words = _test_words(test)
    areas = set(areas_in(f"{test.label} {test.file}", cfg.critical_areas)) if cfg else set()
    found = []
    for f in changes.code_files:
        shared = words & _path_words(f.path)
        if shared or (areas and areas & set(path_areas(f.path, cfg))):
            # A shared module name ("timed") ranks above a shared directory ("src").
            own = _strip_test(PurePosixPath(f.path.lower()).stem) in words
            found.append((not own, not shared, f.path))
    return [path for *_, path in sorted(found)]


@dataclass(frozen=True, slots=True)
class Failures:
    """The release's failing tests as the history sees them."""

    known_flaky: tuple[TestHistory, ...] = ()
    new: tuple[TestHistory, ...] = ()  # never failed before in the service
    returned: tuple[TestHistory, ...] = ()  # failed before, then passed, now again
    correlated: tuple[tuple[TestHistory, tuple[str, ...]], ...] = ()

    @property
    def excused(self) -> frozenset[str]:
        """The labels whose failure alone should not raise the release: known flaky and not
        in code the release changed."""
        return frozenset(t.label for t in self.known_flaky)


def classify_failures(history: History, cfg: PolicySettings) -> Failures:
    failing = history.failing()
    correlated = tuple(
        (t, tuple(paths)) for t in failing if (paths := correlated_paths(t, history.changes, cfg))
    )
    in_changed_code = {t.label for t, _ in correlated}
    flaky = tuple(t for t in failing if is_known_flaky(t, cfg) and t.label not in in_changed_code)
    rest = [t for t in failing if t not in flaky]
    return Failures(
        known_flaky=flaky,
        new=tuple(t for t in rest if not t.failed_before),
        returned=tuple(t for t in rest if t.failed_before),
        correlated=correlated,
    )


def _flaky_sentence(test: TestHistory, service: str) -> str:
    where = f" of {service}" if service else ""
    parts = []
    if test.recent_releases:
        parts.append(
            f"failed in {test.failed_in_recent} of the last "
            f"{_plural(test.recent_releases, 'release')}{where}"
        )
    if test.flaky_here:
        parts.append("failed and passed on a rerun in this release")
    elif test.flaky_in_recent:
        parts.append(f"failed and passed within the same release in {test.flaky_in_recent} of them")
    return f"{shown(test.label)} {' and '.join(parts)} (known flaky)"


def _which(tests: Sequence[TestHistory], all_failing: int) -> str:
    """The tests a sentence is about: by name, or, when they are every failing test of the
    release (which the failed-tests sentence names), by their count alone, so that a report
    lists each failing test once (a real one named the same 5 tests three times). One test
    keeps its name: "All 1 failing tests" says less than the name."""
    if len(tests) == all_failing and all_failing > 1:
        return f"All {all_failing:,} failing tests"
    return _listed([t.label for t in tests])


def _first_failures_sentence(
    tests: Sequence[TestHistory], service: str, all_failing: int = 0
) -> str:
    """The tests that never failed before, in one sentence: what they share is said once."""
    runs = {t.recent_releases for t in tests}
    passed_for = runs.pop() if len(runs) == 1 else 0
    ran = f", after passing in the last {_plural(passed_for, 'release')}" if passed_for else ""
    what = "a new failure" if len(tests) == 1 else "new failures"
    return (
        f"{_which(tests, all_failing)} failed for the first time in "
        f"{service or 'the service'}{ran} ({what})"
    )


def test_area(test: TestHistory, cfg: PolicySettings) -> str:
    """Where a test belongs, in words: its critical areas, else its suite, else its file's
    folder."""
    areas = areas_in(f"{test.label} {test.file}", cfg.critical_areas)
    if areas:
        return ", ".join(sorted(areas))
    if test.suite:
        return test.suite
    folder = str(PurePosixPath(test.file).parent) if test.file else ""
    return folder if folder not in ("", ".") else test.label.rpartition("::")[0] or "the suite"


def newly_skipped(history: History) -> list[TestHistory]:
    """Skipped here, ran (passed or failed) in a recent release, skipped in none of them."""
    return [
        t
        for t in history.tests
        if t.outcome == "skipped"
        and t.recent
        and all(outcome != "skipped" for _, outcome in t.recent)
    ]


def newly_flaky(history: History) -> list[TestHistory]:
    """Failed and passed in this release, and failed in none of the recent ones."""
    return [
        t
        for t in history.tests
        if (t.flaky_here or t.outcome == "flaky") and not t.failed_in_recent
    ]


def _skipped_signal(history: History, cfg: PolicySettings) -> Signal | None:
    skipped = newly_skipped(history)
    if not skipped:
        return None
    by_area: dict[str, list[TestHistory]] = {}
    for t in skipped:
        by_area.setdefault(test_area(t, cfg), []).append(t)
    bulk = [
        area
        for area, tests in by_area.items()
        if len(tests) >= cfg.newly_skipped_in_bulk_at_or_above
        and areas_in(area, cfg.critical_areas)
    ]
    sentences = [
        f"{_plural(len(tests), 'test')} of {area} newly skipped (they ran in the recent "
        f"releases of {history.service or 'the service'}, skipped in none): "
        f"{_listed([t.label for t in tests])}"
        for area, tests in sorted(by_area.items(), key=lambda item: -len(item[1]))[:NAMED]
    ]
    unnamed = sum(len(tests) for tests in sorted(by_area.values(), key=len)[:-NAMED])
    more = f"; and {unnamed} more newly skipped" if len(by_area) > NAMED else ""
    return Signal(
        name="newly_skipped",
        label="Tests newly skipped",
        level=cfg.newly_skipped_in_bulk_level if bulk else cfg.newly_skipped_level,
        critical=False,
        figure=len(skipped),
        threshold=f"{cfg.newly_skipped_level} for a test skipped here that ran before; "
        f"{cfg.newly_skipped_in_bulk_level} from {cfg.newly_skipped_in_bulk_at_or_above} of "
        "one critical area",
        detail="; ".join(sentences) + more,
        areas=tuple(sorted(area for area in bulk)),
    )


def _flaky_here_signal(history: History, cfg: PolicySettings) -> Signal | None:
    flaky = newly_flaky(history)
    if not flaky:
        return None
    window = max((t.recent_releases for t in flaky), default=0)
    since = (
        f", for the first time in the last {_plural(window, 'release')} of "
        f"{history.service or 'the service'}"
        if window
        else ""
    )
    named = "; ".join(f"{shown(t.label)} (in {test_area(t, cfg)})" for t in flaky[:NAMED]) + (
        f" and {len(flaky) - NAMED} more" if len(flaky) > NAMED else ""
    )
    return Signal(
        name="newly_flaky",
        label="Tests newly flaky",
        level=cfg.newly_flaky_level,
        critical=False,
        figure=len(flaky),
        threshold=f"{cfg.newly_flaky_level} for a test that failed and passed in this release "
        "and failed in none of the recent ones",
        detail=f"{_plural(len(flaky), 'test')} failed and passed on a rerun in this release"
        f"{since} (newly flaky): {named}",
    )


def _returned_sentence(test: TestHistory) -> str:
    """A failure seen before that is not flaky: back after passing, or failing still."""
    passing = 0
    for _, outcome in test.recent:
        if outcome != "passed":
            break
        passing += 1
    if passing:
        return (
            f"{shown(test.label)} fails again after passing in the last "
            f"{_plural(passing, 'release')}; it first failed in {test.first_failed_in} "
            "(a failure that came back)"
        )
    return (
        f"{shown(test.label)} is still failing: it failed in {test.failed_in_recent} of the "
        f"last {_plural(test.recent_releases, 'release')}, first in {test.first_failed_in}"
    )


def _what_the_history_follows(tests: Sequence[TestHistory], all_failing: int) -> list[str]:
    """What the failures' history read that their labels do not show: a test file renamed in
    this release (its history is the old name's), reruns that failed every time, and errors
    in setup. Each changes what a failure means, and no other sentence said it."""
    sentences = []
    for t in tests[: NAMED * 4]:
        if t.renamed_from:
            sentences.append(
                f"{shown(t.label)} is in a test file renamed in this release from "
                f"{t.renamed_from}: its history is the old file's"
            )
        if t.failed_every_rerun:
            before = (
                ", where a rerun had passed it before"
                if t.flaky_in_recent or t.failure_runs >= 2
                else ""
            )
            sentences.append(
                f"{shown(t.label)} failed on all {t.failed_runs} runs in this release (its "
                f"reruns failed too{before}): not flaky this time"
            )
    in_setup = [t for t in tests if t.setup_error]
    if in_setup:
        sentences.append(
            f'{_which(in_setup, all_failing)} errored in setup ("failed on setup"): '
            f"{'its' if len(in_setup) == 1 else 'their'} own code never ran; a fixture, the test "
            "database or its migrations broke first"
        )
    return sentences


def failure_signals(history: History, failures: Failures, cfg: PolicySettings) -> list[Signal]:
    signals = []
    service = history.service
    if failures.known_flaky:
        count = len(failures.known_flaky)
        sentences = [_flaky_sentence(t, service) for t in failures.known_flaky[:NAMED]]
        more = f"; and {count - NAMED} more known flaky" if count > NAMED else ""
        signals.append(
            Signal(
                name="known_flaky_failures",
                label="Known-flaky failures",
                level=cfg.known_flaky_failures_level,
                critical=False,
                figure=count,
                threshold=f"{cfg.known_flaky_failures_level} when every failure is known flaky "
                "(failed and passed on the same release, or failed on and off in "
                f"{cfg.known_flaky_failure_runs_at_or_above} or more stretches of the last "
                f"{cfg.history_releases} releases); never high",
                detail="; ".join(sentences) + more,
            )
        )
    new_ones = [*failures.new, *failures.returned]
    if new_ones:
        fresh = [t for t in new_ones if not t.failed_before]
        back = [t for t in new_ones if t.failed_before]
        all_failing = len(history.failing())
        sentences = [_first_failures_sentence(fresh, service, all_failing)] if fresh else []
        sentences += [_returned_sentence(t) for t in back[:NAMED]]
        more = f"; and {len(back) - NAMED} more" if len(back) > NAMED else ""
        more += "".join(f"; {s}" for s in _what_the_history_follows(new_ones, all_failing))
        signals.append(
            Signal(
                name="new_failures",
                label="Failures that are not known flaky",
                level=cfg.failed_tests_level,
                critical=False,
                figure=len(new_ones),
                threshold=f"{cfg.failed_tests_level} from 1 failure that is not known flaky",
                detail="; ".join(sentences) + more,
            )
        )
    if failures.correlated:
        # Tests beside the same files go in one sentence: each named with the same paths
        # again made the sentence the longest a model had to copy.
        beside: dict[tuple[str, ...], list[str]] = {}
        for t, paths in failures.correlated:
            beside.setdefault(tuple(paths), []).append(t.label)
        all_failing = len(history.failing())
        sentences = [
            f"{_which([t for t, _ in failures.correlated], all_failing)} "
            f"{'fails' if all_failing == 1 else 'fail'} beside changed code: "
            f"{_listed(list(paths))}"
            if len(beside) == 1 and len(failures.correlated) == all_failing
            else f"{_listed(labels)} {'fails' if len(labels) == 1 else 'fail'} beside changed "
            f"code: {_listed(list(paths))}"
            for paths, labels in list(beside.items())[:NAMED]
        ]
        count = len(failures.correlated)
        unnamed = sum(len(labels) for labels in list(beside.values())[NAMED:])
        more = f"; and {unnamed} more" if unnamed else ""
        signals.append(
            Signal(
                name="correlated_failures",
                label="Failures beside changed code",
                level=cfg.correlated_failures_level,
                critical=False,
                figure=count,
                threshold=f"{cfg.correlated_failures_level} from 1 failing test whose directory, "
                "module or class matches a changed file",
                detail="; ".join(sentences) + more,
            )
        )
    signals += [s for s in (_skipped_signal(history, cfg), _flaky_here_signal(history, cfg)) if s]
    return signals


# ---------------------------------------------------------------------------------------
# The change: size, spread, critical paths, authors
# ---------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------
# Metrics against their baseline
# ---------------------------------------------------------------------------------------


def judge_metrics(history: History, cfg: PolicySettings) -> Judgement | None:
    """The judge's verdict on the metrics it has settings for, each against its baseline
    window or, without one, the recent releases' windows. None when no such metric has a
    series of samples in this release."""
    settings = cfg.judge_settings()
    # One sample is a figure (a metrics file's snapshot), which the summary's signals judge;
    # a series of them is what the judge compares.
    judged = [m for m in history.metrics if m.name in settings.metrics and len(m.release) > 1]
    if not judged:
        return None
    baseline = {m.name: m.comparison(settings.min_samples)[0] for m in judged}
    current = {m.name: m.release for m in judged}
    return judge(baseline, current, settings)


def metric_signal(history: History, cfg: PolicySettings) -> Signal | None:
    judgement = judge_metrics(history, cfg)
    if judgement is None:
        return None
    against = sorted(
        {
            m.comparison(cfg.metric_min_samples)[1]
            for m in history.metrics
            if judgement.metric(m.name) is not None
        }
    )
    level: Level = "none"
    critical = False
    if judgement.vetoed_by:
        level, critical = cfg.critical_metric_regression_level, True
    elif judgement.outcome == "fail":
        level = cfg.metric_regression_level
    elif judgement.outcome == "too_little_data":
        level = cfg.too_little_metric_data_level
    figures = [m.sentence for m in judgement.metrics if m.outcome != "pass" or level == "none"]
    if against != ["the baseline window"]:
        # The judge's "the baseline" is then the recent releases: say so.
        figures.insert(0, f"Against {' and '.join(against)}:")
    if judgement.outcome == "too_little_data":
        figures.insert(0, judgement.sentence)
    regressed = [m.label for m in judgement.metrics if m.outcome == "fail"]
    return Signal(
        name="metric_judge",
        label="Metrics against " + " and ".join(against),
        level=level,
        critical=critical,
        figure=", ".join(regressed) or judgement.outcome,
        threshold=f"Mann-Whitney at {cfg.metric_confidence * 100:g} % confidence, at least "
        f"{cfg.metric_min_samples} samples a window; {cfg.metric_regression_level} for a "
        f"regression, {cfg.critical_metric_regression_level} for a critical metric's; "
        f"{cfg.too_little_metric_data_level} and a person's review for too little data",
        detail=" ".join(figures),
        needs_review=judgement.outcome == "too_little_data",
    )


def history_signals(history: History, failures: Failures, cfg: PolicySettings) -> list[Signal]:
    """Every history-aware signal of the release, but the failures' effect on the test
    signals (which `policy._tests` applies with `failures.excused`)."""
    signals = failure_signals(history, failures, cfg)
    signals += suspect_signals([*failures.new, *failures.returned], cfg)
    if history.changes is not None:
        signals += change_signals(history.changes, cfg)
    metric = metric_signal(history, cfg)
    if metric is not None:
        signals.append(metric)
    return [s for s in signals if s.detail]


__all__ = [
    "LEVEL_RANK",
    "Failures",
    "classify_failures",
    "correlated_paths",
    "history_signals",
    "is_known_flaky",
    "judge_metrics",
]
