"""The risk policy: signals computed from a release's data by plain code, and the severity
they add up to.

A *signal* is one thing the policy looks at (the error rate, failed tests, a missing field
...), with the figure it read, the threshold it compared it with, and a *level*: none, low,
medium or high. The policy's severity is the highest level among its signals, with one rule
on top: only a *critical* signal can make a release high (a non-critical signal at high
counts as medium). That severity is the floor a filed report may not go below without a
person looking at it.

Boundaries are explicit and named by the side they fall on: `*_medium_at_or_above` includes
its value, `*_high_above` excludes it. With the defaults an error rate of exactly 0.05 is
medium and 0.0501 is high; exactly 0.02 is medium and 0.0199 is none. They reproduce the
specification's severity guidelines:

- high: an error rate above 5 %; a failed test in a critical area (payments, auth, security,
  data, migrations) on evidence: its first suspect changed that area, or, where no suspects
  could be computed, the release changed code there; risky changes together with failed tests;
- medium: any other failed test; an error rate from 2 % to 5 %; p95 latency notably up
  (above 1,000 ms, or 20 % or more above the previous release); missing data; risky changes;
- low: none of the above.

The settings (`PolicySettings`) are data: the admin edits them, and every edit is a new
version of the policy (`releases.models.RiskPolicy`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from risk.change_signals import changed_areas
from risk.changes import NO_CHANGES
from risk.history import EMPTY as EMPTY_HISTORY
from risk.history import History
from risk.history_signals import (
    Failures,
    classify_failures,
    history_signals,
)
from risk.instructions import instruction_like_bodies, instruction_like_texts
from risk.run_counts import failed_subtests_said, partial_run_signal
from risk.settings import (
    DEFAULT_CRITICAL_AREAS,
    LEVEL_RANK,
    SEVERITY_RANK,
    Level,
    PolicySettings,
    Severity,
    threshold_order_problems,
)
from risk.signal import (
    INSTRUCTIONS_SIGNAL,
    NO_CHANGES_SIGNAL,
    PolicyVerdict,
    Signal,
    areas_in,
    change_areas,
    level_by,
    ms,
    number,
    pct,
    severity_of,
    shown,
)

__all__ = [
    "DEFAULT_CRITICAL_AREAS",
    "LEVEL_RANK",
    "SEVERITY_RANK",
    "Level",
    "PolicySettings",
    "PolicyVerdict",
    "Severity",
    "Signal",
    "areas_in",
    "evaluate",
    "severity_of",
    "threshold_order_problems",
]

# ---------------------------------------------------------------------------------------
# Reading the release
# ---------------------------------------------------------------------------------------


def _error_rate(rate: float, cfg: PolicySettings, baseline: float | None = None) -> list[Signal]:
    level = level_by(
        rate,
        medium_at_or_above=cfg.error_rate_medium_at_or_above,
        high_above=cfg.error_rate_high_above,
    )
    high, medium = pct(cfg.error_rate_high_above), pct(cfg.error_rate_medium_at_or_above)
    threshold = f"high above {high}; medium from {medium} up to and including {high}"
    where = {
        "high": f"above the {high} limit for high",
        "medium": f"from the {medium} limit for medium up to {high}",
        "none": f"below the {medium} limit for medium",
    }[level]
    signals = [
        Signal(
            name="error_rate",
            label="Error rate",
            level=level,
            critical=cfg.error_rate_critical,
            figure=rate,
            threshold=threshold,
            detail=f"Error rate {pct(rate)}, {where}",
        )
    ]
    if baseline is not None:
        signals.append(_error_rate_change(rate, baseline, cfg))
    return signals


def _error_rate_change(rate: float, baseline: float, cfg: PolicySettings) -> Signal:
    """The error rate against its baseline window: a relative rise with an absolute floor."""
    times = rate / baseline if baseline > 0 else (1.0 if rate == 0 else float("inf"))
    rise = rate - baseline
    medium, high = cfg.error_rise_times_medium_at_or_above, cfg.error_rise_times_high_at_or_above
    level: Level = "none"
    if high is not None and times >= high:
        level = "high"
    elif medium is not None and times >= medium:
        level = "medium"
    limits = [
        f"{name} from {number_of_times(limit)} the baseline"
        for name, limit in (("medium", medium), ("high", high))
        if limit is not None
    ]
    limits.append(f"a rise under {points(cfg.error_rate_min_rise)} is none")
    how = "up from nothing" if baseline <= 0 < rate else f"{number_of_times(times)} the baseline"
    limit = {
        "high": f", at or above the {number_of_times(high or 0)} limit for high",
        "medium": f", at or above the {number_of_times(medium or 0)} limit",
    }.get(level, "")
    if level != "none" and rise < cfg.error_rate_min_rise:
        level = "none"
        limit = f", but by {points(rise)}, under the {points(cfg.error_rate_min_rise)} that counts"
    return Signal(
        name="error_rate_change",
        label="Error rate against its baseline",
        level=level,
        # High only when set so, and then as the error rate's own limit is: critical.
        critical=cfg.error_rate_critical,
        figure=None if times == float("inf") else round(times, 2),
        threshold="; ".join(limits),
        detail=f"Error rate {pct(rate)} against {pct(baseline)} in its baseline window: "
        f"{how}{limit}",
    )


def points(fraction: float) -> str:
    """A difference of two rates: 0.008 -> "0.8 percentage points"."""
    return f"{fraction * 100:.2g} percentage points"


def number_of_times(value: float) -> str:
    return f"{value:.1f} times" if value < 10 else f"{value:.0f} times"


def _latency(
    p95: float, baseline: float | None, baseline_from: str, cfg: PolicySettings
) -> list[Signal]:
    signals = []
    level: Level = "none"
    if cfg.p95_ms_high_above is not None and p95 > cfg.p95_ms_high_above:
        level = "high"
    elif cfg.p95_ms_medium_above is not None and p95 > cfg.p95_ms_medium_above:
        level = "medium"
    limits = [f"medium above {ms(cfg.p95_ms_medium_above)}"] if cfg.p95_ms_medium_above else []
    if cfg.p95_ms_high_above is not None:
        limits.append(f"high above {ms(cfg.p95_ms_high_above)}")
    if level == "high" and cfg.p95_ms_high_above is not None:
        where = f", above the {ms(cfg.p95_ms_high_above)} limit for high"
    elif level == "medium" and cfg.p95_ms_medium_above is not None:
        where = f", above the {ms(cfg.p95_ms_medium_above)} limit"
    elif cfg.p95_ms_medium_above is not None:
        where = f", within the {ms(cfg.p95_ms_medium_above)} limit"
    else:
        where = ""
    signals.append(
        Signal(
            name="p95_latency",
            label="p95 latency",
            level=level,
            critical=cfg.latency_critical,
            figure=p95,
            threshold="; ".join(limits) or "not judged",
            detail=f"p95 latency {ms(p95)}{where}",
        )
    )
    if baseline is not None and baseline > 0:
        rise = (p95 - baseline) / baseline
        level = "none"
        if cfg.p95_rise_high_at_or_above is not None and rise >= cfg.p95_rise_high_at_or_above:
            level = "high"
        elif (
            cfg.p95_rise_medium_at_or_above is not None and rise >= cfg.p95_rise_medium_at_or_above
        ):
            level = "medium"
        limits = []
        if cfg.p95_rise_medium_at_or_above is not None:
            limits.append(f"medium from a {pct(cfg.p95_rise_medium_at_or_above)} rise")
        if cfg.p95_rise_high_at_or_above is not None:
            limits.append(f"high from a {pct(cfg.p95_rise_high_at_or_above)} rise")
        direction = "up" if rise >= 0 else "down"
        limit = {
            "high": f", above the {pct(cfg.p95_rise_high_at_or_above or 0)} limit for high",
            "medium": f", above the {pct(cfg.p95_rise_medium_at_or_above or 0)} limit",
        }.get(level, "")
        if cfg.p95_min_ms_rise is not None:
            limits.append(f"a rise under {ms(cfg.p95_min_ms_rise)} is none")
            if level != "none" and p95 - baseline < cfg.p95_min_ms_rise:
                level = "none"
                limit = (
                    f", but by {ms(p95 - baseline)}, under the {ms(cfg.p95_min_ms_rise)} "
                    "that counts as a rise"
                )
        signals.append(
            Signal(
                name="p95_change",
                label="p95 latency against " + baseline_from,
                level=level,
                critical=cfg.latency_critical,
                figure=round(rise, 4),
                threshold="; ".join(limits) or "not judged",
                detail=(
                    f"p95 latency {ms(p95)} against {ms(baseline)} ({baseline_from}): "
                    f"{direction} {abs(rise) * 100:.0f} %{limit}"
                ),
            )
        )
    return signals


def _tests(
    tests: Mapping[str, Any],
    risky_found: tuple[list[str], list[str]],
    cfg: PolicySettings,
    *,
    excused: frozenset[str] = frozenset(),
    computed: frozenset[str] = frozenset(),
    ranked: frozenset[str] = frozenset(),
    earlier_counts: Sequence[tuple[str, int]] = (),
) -> list[Signal]:
    """The test signals. `excused` are failing tests the history shows to be known flaky:
    failures of those alone count at `known_flaky_failures_level`, and they neither make a
    critical area's failure nor go with risky changes.

    A failing test is in a critical area on evidence, never on a word of its name alone: where
    its suspects were computed (`computed`), its first suspect's path decides, in
    `suspect_in_critical_area` (risk/suspect_signals.py), and nothing here; where they could
    not be (no changed lines were ingested), a change of the release in the area its name
    names (`risky_found`'s areas: code files, else change lines) backs it. With no change in
    that area, a critical word in a failing test's name raises nothing beyond `failed_tests`."""
    signals = []
    failed = number(tests.get("failed"))
    failing = [t for t in tests.get("failing_tests") or [] if isinstance(t, str)]
    if failed is None:
        signals.append(_missing("tests.failed", "the count of failed tests", cfg))
        failed = float(len(failing))
    failed_count = int(failed)
    flaky_count = sum(name in excused for name in failing)
    counted = [name for name in failing if name not in excused]
    real_count = max(failed_count - flaky_count, 0)
    level: Level = "none"
    if failed_count > 0 and real_count == 0:
        level = cfg.known_flaky_failures_level
    elif failed_count > 0:
        level = cfg.failed_tests_level
        if (
            cfg.failed_tests_high_at_or_above is not None
            and failed_count >= cfg.failed_tests_high_at_or_above
        ):
            level = "high"
    names = f": {', '.join(shown(name) for name in failing)}" if failing else ""
    if failed_count and not failing:
        names = " (the failing tests are not named, so their areas are unknown)"
    signals.append(
        Signal(
            name="failed_tests",
            label="Failed tests",
            level=level,
            critical=cfg.failed_tests_critical,
            figure=failed_count,
            threshold=f"{cfg.failed_tests_level} from 1 failed test"
            + (
                f"; high from {cfg.failed_tests_high_at_or_above}"
                if cfg.failed_tests_high_at_or_above
                else ""
            ),
            detail=f"{failed_count} failed test{'s' if failed_count != 1 else ''}{names}"
            + (f" ({flaky_count} of them known flaky)" if flaky_count else "")
            + (f"; {subtests}" if (subtests := failed_subtests_said(tests)) else ""),
        )
    )
    if partial := partial_run_signal(tests, earlier_counts, cfg):
        signals.append(partial)
    risky, changed_in = risky_found
    critical_failures, areas = _in_critical_areas(
        [name for name in counted if name not in computed], cfg, changed_in
    )
    if critical_failures:
        signals.append(
            Signal(
                name="critical_area_failures",
                label="Failed tests in a critical area",
                level=cfg.critical_area_failure_level,
                critical=True,
                figure=len(critical_failures),
                threshold=f"{cfg.critical_area_failure_level} from 1 failing test in "
                + ", ".join(cfg.critical_areas),
                detail=f"{len(critical_failures)} failing test"
                f"{'s' if len(critical_failures) != 1 else ''} in {', '.join(areas)}: "
                + ", ".join(shown(name) for name in critical_failures),
                areas=tuple(areas),
            )
        )
    areas = changed_in
    # A failure with ranked suspects (`ranked`: computed, and at least one found) is tied to
    # a critical change only by its suspect (`suspect_in_critical_area`): a dependency bump in
    # payments beside a failure that runs through other code is not its cause. The pairing
    # stands for the rest, including a failure the ranking found no change for: its code may
    # lie outside what the ranking could see (a test file not in the checkout).
    unranked = [name for name in counted if name not in ranked]
    unexplained = real_count - (len(counted) - len(unranked))
    if risky and unexplained > 0:
        failures_said = (
            f"{failed_count} failed test{'s' if failed_count != 1 else ''}"
            if len(unranked) == len(counted)
            else "failing tests with no ranked suspect: "
            + ", ".join(shown(name) for name in unranked)
        )
        signals.append(
            Signal(
                name="risky_changes_with_failures",
                label="Risky changes together with failed tests",
                level=cfg.risky_changes_with_failures_level,
                critical=True,
                figure=failed_count,
                threshold=f"{cfg.risky_changes_with_failures_level} when a change touches a "
                "critical area and a test fails that has no ranked suspect",
                detail=f"{len(risky)} change{'s' if len(risky) != 1 else ''} in "
                f"{', '.join(areas)} and {failures_said}",
                areas=tuple(areas),
            )
        )
    skipped, passed = number(tests.get("skipped")), number(tests.get("passed"))
    if passed == 0 and failed == 0 and skipped == 0:
        signals.append(
            Signal(
                name="no_tests_ran",
                label="No tests ran",
                level=cfg.no_tests_ran_level,
                critical=False,
                figure=0,
                threshold=f"{cfg.no_tests_ran_level} when nothing ran, as for missing results",
                detail="No tests ran: 0 passed, 0 failed, 0 skipped, so the tests show nothing "
                "about this release",
            )
        )
    total = sum(x for x in (passed, failed, skipped) if x is not None)
    if cfg.skipped_share_low_at_or_above is not None and skipped and total:
        share = skipped / total
        if share >= cfg.skipped_share_low_at_or_above:
            signals.append(
                Signal(
                    name="skipped_tests",
                    label="Skipped tests",
                    level="low",
                    critical=False,
                    figure=int(skipped),
                    threshold=f"low from {pct(cfg.skipped_share_low_at_or_above)} skipped",
                    detail=f"{int(skipped)} of {int(total)} tests skipped ({share * 100:.0f} %)",
                )
            )
    return signals


def _in_critical_areas(
    texts: Sequence[str], cfg: PolicySettings, changed: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The texts that touch a critical area the release `changed`, and those areas (sorted)."""
    found = {
        text: [a for a in areas_in(text, cfg.critical_areas) if a in changed] for text in texts
    }
    touching = [text for text in texts if found[text]]
    return touching, sorted({area for areas in found.values() for area in areas})


def risky_changes(changes: Sequence[str], cfg: PolicySettings) -> tuple[list[str], list[str]]:
    """The change lines (commit subjects) that name a critical area (its words standing whole,
    or a database upgrade or schema change; a dependency bump's never), and those areas
    (sorted). Read only when the release has no commits of its own to read files from."""
    found = {change: change_areas(change, cfg) for change in changes}
    touching = [change for change in changes if found[change]]
    return touching, sorted({area for areas in found.values() for area in areas})


def _risky_changes(changes: Sequence[str], cfg: PolicySettings) -> Signal | None:
    risky, areas = risky_changes(changes, cfg)
    if not risky:
        return None
    return Signal(
        name="risky_changes",
        label="Changes in a critical area",
        level=cfg.risky_changes_level,
        critical=False,
        figure=len(risky),
        threshold=f"{cfg.risky_changes_level} from 1 change in " + ", ".join(cfg.critical_areas),
        detail=f"{len(risky)} change{'s' if len(risky) != 1 else ''} in {', '.join(areas)}",
        areas=tuple(areas),
    )


MISSING_LABELS = {
    "changes": "the list of changes",
    "tests": "the test results",
    "deployment_metrics": "the deployment metrics",
    "deployment_metrics.error_rate": "the error rate",
    "deployment_metrics.response_time_p95": "the p95 latency",
}


def _missing(field_name: str, what: str, cfg: PolicySettings) -> Signal:
    return Signal(
        name=f"missing_{field_name.replace('.', '_')}",
        label=f"Missing: {what}",
        level=cfg.missing_data_level,
        critical=False,
        figure=None,
        threshold=f"{cfg.missing_data_level} for each missing field (never read as zero)",
        detail=f"missing from the release data: {what}",
    )


def _no_changes() -> Signal:
    """A range with no commit. Nothing to weigh in it, but it says what every other signal
    means: a failure or a metric that moved did not come from the release's code."""
    return Signal(
        name=NO_CHANGES_SIGNAL,
        label="No changes in the range",
        level="none",
        critical=False,
        figure=0,
        threshold="said whenever the release's range holds no commit",
        detail="No changes: the range holds no commit (a rebuild of the previous release's "
        "commit), so whatever differs from that release came from outside its code: the "
        "environment, data, configuration or dependencies resolved at build time",
    )


def _instructions(summary: Mapping[str, Any], cfg: PolicySettings, past: History) -> Signal | None:
    found = instruction_like_texts(summary)
    # Commit bodies (issue 30): an order hidden below a plain title is seen, not left unread.
    if past.changes is not None:
        found += instruction_like_bodies(past.changes.messages)
    if not found:
        return None
    # Where, not what: the signals reach the model, and the text itself must not.
    places = ", ".join(where for where, _ in found[:5])
    return Signal(
        name=INSTRUCTIONS_SIGNAL,
        label="Release data addressed to the assessor",
        level=cfg.instructions_in_data_level,
        critical=False,
        figure=len(found),
        threshold="always flagged; a person reviews the report",
        detail=f"{len(found)} text{'s' if len(found) != 1 else ''} in the release data "
        f"read{'s' if len(found) == 1 else ''} like instructions to the assessor (at {places}); "
        "withheld from the model",
        needs_review=True,
    )


def evaluate(
    summary: Mapping[str, Any],
    cfg: PolicySettings | None = None,
    *,
    previous_p95: float | None = None,
    history: History | None = None,
) -> PolicyVerdict:
    """The policy's verdict on a release summary (the API's shape: `changes`, `tests`,
    `deployment_metrics`; None or absent means missing).

    `previous_p95` is the previous release's p95, when there is one; a `response_time_p95_
    baseline` in the metrics themselves takes precedence (it was measured for this release).
    `history` is the release's past in its service (risk/history_signals.py reads
    it); without one, or an empty one, the verdict is the summary's alone.
    """
    cfg = cfg or PolicySettings()
    past = history or EMPTY_HISTORY
    signals: list[Signal] = []
    raw_changes = summary.get("changes")
    changes = (
        [c for c in raw_changes if isinstance(c, str)] if isinstance(raw_changes, list) else []
    )
    if not changes:
        signals.append(_missing("changes", MISSING_LABELS["changes"], cfg))
    elif changes == [NO_CHANGES]:
        signals.append(_no_changes())
    failures = classify_failures(past, cfg) if past.has_test_detail else Failures()
    # With the commits themselves, their code files decide the areas (and a person's subject
    # naming a schema change); the summary's lines are those commits' subjects again, whose
    # words alone are a mention (`subject_mentions`). Without them, the lines are all there is.
    detail = past.changes is not None and bool(past.changes.commit_list)
    risky_texts, risky_areas = ([], []) if detail else risky_changes(changes, cfg)
    if past.changes is not None:
        in_detail = changed_areas(past.changes, cfg)
        risky_texts += sorted({item for items in in_detail.values() for item in items})
        risky_areas = sorted({*risky_areas, *in_detail})
    tests = summary.get("tests")
    if isinstance(tests, Mapping) and tests:
        computed = frozenset(t.label for t in past.failing() if t.suspects_computed)
        ranked = frozenset(t.label for t in past.failing() if t.suspects_computed and t.suspects)
        signals += _tests(
            tests,
            (risky_texts, risky_areas),
            cfg,
            excused=failures.excused,
            computed=computed,
            ranked=ranked,
            earlier_counts=past.earlier_test_counts,
        )
    else:
        signals.append(_missing("tests", MISSING_LABELS["tests"], cfg))
    metrics = summary.get("deployment_metrics")
    if isinstance(metrics, Mapping) and metrics:
        rate = number(metrics.get("error_rate"))
        if rate is None:
            signals.append(
                _missing(
                    "deployment_metrics.error_rate",
                    MISSING_LABELS["deployment_metrics.error_rate"],
                    cfg,
                )
            )
        else:
            signals += _error_rate(rate, cfg, number(metrics.get("error_rate_baseline")))
        p95 = number(metrics.get("response_time_p95"))
        if p95 is None:
            signals.append(
                _missing(
                    "deployment_metrics.response_time_p95",
                    MISSING_LABELS["deployment_metrics.response_time_p95"],
                    cfg,
                )
            )
        else:
            own = number(metrics.get("response_time_p95_baseline"))
            baseline, baseline_from = (
                (own, "its baseline") if own is not None else (previous_p95, "the previous release")
            )
            signals += _latency(p95, baseline, baseline_from, cfg)
    else:
        signals.append(_missing("deployment_metrics", MISSING_LABELS["deployment_metrics"], cfg))
    risky = None if detail else _risky_changes(changes, cfg)
    if risky is not None:
        signals.append(risky)
    signals += history_signals(past, failures, cfg)
    instructions = _instructions(summary, cfg, past)
    if instructions is not None:
        signals.append(instructions)
    return PolicyVerdict(severity=severity_of(signals), signals=tuple(signals))
