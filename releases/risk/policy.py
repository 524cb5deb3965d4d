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
  data, migrations); risky changes together with failed tests;
- medium: any other failed test; an error rate from 2 % to 5 %; p95 latency notably up
  (above 1,000 ms, or 20 % or more above the previous release); missing data; risky changes;
- low: none of the above.

The settings (`PolicySettings`) are data: the admin edits them, and every edit is a new
version of the policy (`releases.models.RiskPolicy`).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from releases.risk.history import History
from releases.risk.instructions import instruction_like_texts, reads_like_instruction

Level = Literal["none", "low", "medium", "high"]
Severity = Literal["low", "medium", "high"]

LEVEL_RANK: dict[str, int] = {"none": 0, "low": 1, "medium": 2, "high": 3}
SEVERITY_RANK: dict[str, int] = {"low": 1, "medium": 2, "high": 3}

DEFAULT_CRITICAL_AREAS: dict[str, list[str]] = {
    "payments": [
        "payment", "pay", "checkout", "refund", "ledger", "payout", "billing", "invoice", "psp",
        "3ds", "3-d secure", "charge", "capture",
    ],
    "auth": [
        "auth", "authentication", "login", "logout", "session", "token", "password",
        "oauth", "oidc", "sso", "2fa", "mfa", "identity provider", "permission",
    ],
    "security": [
        "security", "secure", "csrf", "xss", "encryption", "encrypt", "secret",
        "vulnerability", "cve", "rate limit", "rate limiting",
    ],
    "data": ["data integrity", "backfill", "data loss", "purge", "truncate"],
    "migrations": ["migration", "migrate", "schema", "alter table"],
}  # fmt: skip


class PolicySettings(BaseModel):
    """Every threshold and switch of the policy. The defaults are policy version 1."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    error_rate_medium_at_or_above: float = Field(0.02, ge=0, le=1)
    error_rate_high_above: float = Field(0.05, ge=0, le=1)
    error_rate_critical: bool = True

    p95_ms_medium_above: float | None = Field(1000.0, ge=0)
    p95_ms_high_above: float | None = Field(None, ge=0)
    # The rise of p95 against the previous release (or the metrics' own baseline), as a
    # fraction: 0.2 is 20 % slower.
    p95_rise_medium_at_or_above: float | None = Field(0.2, ge=0)
    p95_rise_high_at_or_above: float | None = Field(None, ge=0)
    latency_critical: bool = False

    failed_tests_level: Level = "medium"
    failed_tests_high_at_or_above: int | None = Field(None, ge=1)
    failed_tests_critical: bool = False
    critical_area_failure_level: Level = "high"
    risky_changes_level: Level = "medium"
    risky_changes_with_failures_level: Level = "high"

    missing_data_level: Level = "medium"
    instructions_in_data_level: Level = "medium"
    # A quarter of the tests skipped says little about the release: worth a mention.
    skipped_share_low_at_or_above: float | None = Field(0.25, ge=0, le=1)

    critical_areas: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_CRITICAL_AREAS.items()}
    )

    # How many of the service's earlier releases the history-aware signals look back over.
    history_releases: int = Field(10, ge=1, le=100)


# (medium's setting, high's setting, what they measure): medium must start below high.
_ORDERED = (
    ("error_rate_medium_at_or_above", "error_rate_high_above", "error rate"),
    ("p95_ms_medium_above", "p95_ms_high_above", "p95 latency (ms)"),
    ("p95_rise_medium_at_or_above", "p95_rise_high_at_or_above", "p95 rise"),
)


def threshold_order_problems(cfg: PolicySettings) -> list[str]:
    """Thresholds out of order, in words: a medium threshold above its high one would call a
    release high before it is medium (the policy form and `new_policy_version` refuse it)."""
    problems = []
    for medium_name, high_name, what in _ORDERED:
        medium, high = getattr(cfg, medium_name), getattr(cfg, high_name)
        if medium is not None and high is not None and medium > high:
            problems.append(
                f"The {what} thresholds are out of order: medium starts at {medium:g} "
                f"({medium_name}), above high's {high:g} ({high_name}). Medium must start "
                "below high."
            )
    return problems


@dataclass(frozen=True, slots=True)
class Signal:
    """One thing the policy read in the release, and the level it gives it."""

    name: str
    label: str
    level: Level
    critical: bool
    figure: float | str | None = None
    threshold: str = ""
    detail: str = ""
    # Signals that always need a person, whatever the model files.
    needs_review: bool = False
    areas: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["areas"] = list(self.areas)
        return data

    @property
    def counts_as(self) -> Level:
        """The level this signal contributes to the policy's severity."""
        if self.level == "high" and not self.critical:
            return "medium"
        return self.level


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    severity: Severity
    signals: tuple[Signal, ...]

    def raised(self) -> list[Signal]:
        """The signals that raise the severity above low, highest first."""
        found = [s for s in self.signals if LEVEL_RANK[s.counts_as] >= LEVEL_RANK["medium"]]
        return sorted(found, key=lambda s: -LEVEL_RANK[s.counts_as])

    def missing(self) -> list[Signal]:
        return [s for s in self.signals if s.name.startswith("missing_")]

    def evidence(self) -> list[str]:
        """The policy's findings as sentences that carry their figures: text addressed to the
        assessor first (a report must say so), then the signals that raise the severity,
        highest first; for a release nothing raises, what each signal read.

        Measured on Qwen2.5-Coder-1.5B: told to copy each raised signal's detail, it copied
        the labels ("Error rate") and wrote its own comparisons, often the wrong way round; a
        list of finished sentences it copies as they are."""
        flagged = [s for s in self.signals if s.needs_review]
        shown = flagged + [s for s in self.raised() if s not in flagged]
        return [s.detail for s in (shown or list(self.signals)) if s.detail]

    def as_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "signals": [s.as_dict() for s in self.signals]}


def severity_of(signals: Iterable[Signal]) -> Severity:
    rank = max((LEVEL_RANK[s.counts_as] for s in signals), default=0)
    return "high" if rank >= 3 else "medium" if rank == 2 else "low"


# ---------------------------------------------------------------------------------------
# Reading the release
# ---------------------------------------------------------------------------------------


def _word_pattern(word: str) -> str:
    # "auth" finds "authentication", "payment" finds "payments"; short words must be exact,
    # or "pay" would find "payload".
    tail = r"\w*" if len(word) >= 4 else ""
    return rf"\b{re.escape(word)}{tail}\b"


@functools.lru_cache(maxsize=32)
def _area_patterns(
    areas: tuple[tuple[str, tuple[str, ...]], ...],
) -> list[tuple[str, re.Pattern[str]]]:
    compiled = []
    for area, phrases in areas:
        alternatives = [
            "[^a-z0-9]+".join(_word_pattern(w) for w in phrase.lower().split())
            for phrase in phrases
            if phrase.strip()
        ]
        if alternatives:
            compiled.append((area, re.compile("|".join(alternatives))))
    return compiled


def areas_in(text: str, areas: Mapping[str, Sequence[str]]) -> list[str]:
    """The critical areas whose words appear in `text` (test names' underscores are spaces)."""
    return list(_areas_in(text, tuple((area, tuple(words)) for area, words in areas.items())))


# The policy, the digest and the grounding each ask about the same changes and test names.
@functools.lru_cache(maxsize=4096)
def _areas_in(text: str, areas: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[str, ...]:
    normalised = text.lower().replace("_", " ")
    return tuple(area for area, pattern in _area_patterns(areas) if pattern.search(normalised))


def _shown(text: str) -> str:
    # Signals reach the model: a test name that gives orders is named by what it is.
    return "[a test name that reads like instructions]" if reads_like_instruction(text) else text


def _number(value: Any) -> float | None:
    """A finite number, or None (missing): a value the policy cannot read counts as missing."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _pct(value: float) -> str:
    """A fraction as a percentage a person reads: 0.071 -> "7.1 %"."""
    return f"{value * 100:.4g} %"


def _ms(value: float) -> str:
    """Milliseconds with a thousands separator: 1350 -> "1,350 ms"."""
    return f"{value:,.10g} ms"


def _level_by(
    value: float, *, medium_at_or_above: float | None = None, high_above: float | None = None
) -> Level:
    if high_above is not None and value > high_above:
        return "high"
    if medium_at_or_above is not None and value >= medium_at_or_above:
        return "medium"
    return "none"


def _error_rate(rate: float, cfg: PolicySettings) -> Signal:
    level = _level_by(
        rate,
        medium_at_or_above=cfg.error_rate_medium_at_or_above,
        high_above=cfg.error_rate_high_above,
    )
    high, medium = _pct(cfg.error_rate_high_above), _pct(cfg.error_rate_medium_at_or_above)
    threshold = f"high above {high}; medium from {medium} up to and including {high}"
    where = {
        "high": f"above the {high} limit for high",
        "medium": f"from the {medium} limit for medium up to {high}",
        "none": f"below the {medium} limit for medium",
    }[level]
    return Signal(
        name="error_rate",
        label="Error rate",
        level=level,
        critical=cfg.error_rate_critical,
        figure=rate,
        threshold=threshold,
        detail=f"Error rate {_pct(rate)}, {where}",
    )


def _latency(
    p95: float, baseline: float | None, baseline_from: str, cfg: PolicySettings
) -> list[Signal]:
    signals = []
    level: Level = "none"
    if cfg.p95_ms_high_above is not None and p95 > cfg.p95_ms_high_above:
        level = "high"
    elif cfg.p95_ms_medium_above is not None and p95 > cfg.p95_ms_medium_above:
        level = "medium"
    limits = [f"medium above {_ms(cfg.p95_ms_medium_above)}"] if cfg.p95_ms_medium_above else []
    if cfg.p95_ms_high_above is not None:
        limits.append(f"high above {_ms(cfg.p95_ms_high_above)}")
    if level == "high" and cfg.p95_ms_high_above is not None:
        where = f", above the {_ms(cfg.p95_ms_high_above)} limit for high"
    elif level == "medium" and cfg.p95_ms_medium_above is not None:
        where = f", above the {_ms(cfg.p95_ms_medium_above)} limit"
    elif cfg.p95_ms_medium_above is not None:
        where = f", within the {_ms(cfg.p95_ms_medium_above)} limit"
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
            detail=f"p95 latency {_ms(p95)}{where}",
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
            limits.append(f"medium from a {_pct(cfg.p95_rise_medium_at_or_above)} rise")
        if cfg.p95_rise_high_at_or_above is not None:
            limits.append(f"high from a {_pct(cfg.p95_rise_high_at_or_above)} rise")
        direction = "up" if rise >= 0 else "down"
        limit = {
            "high": f", above the {_pct(cfg.p95_rise_high_at_or_above or 0)} limit for high",
            "medium": f", above the {_pct(cfg.p95_rise_medium_at_or_above or 0)} limit",
        }.get(level, "")
        signals.append(
            Signal(
                name="p95_change",
                label="p95 latency against " + baseline_from,
                level=level,
                critical=cfg.latency_critical,
                figure=round(rise, 4),
                threshold="; ".join(limits) or "not judged",
                detail=(
                    f"p95 latency {_ms(p95)} against {_ms(baseline)} ({baseline_from}): "
                    f"{direction} {abs(rise) * 100:.0f} %{limit}"
                ),
            )
        )
    return signals


def _tests(tests: Mapping[str, Any], changes: Sequence[str], cfg: PolicySettings) -> list[Signal]:
    signals = []
    failed = _number(tests.get("failed"))
    failing = [t for t in tests.get("failing_tests") or [] if isinstance(t, str)]
    if failed is None:
        signals.append(_missing("tests.failed", "the count of failed tests", cfg))
        failed = float(len(failing))
    failed_count = int(failed)
    level: Level = "none"
    if failed_count > 0:
        level = cfg.failed_tests_level
        if (
            cfg.failed_tests_high_at_or_above is not None
            and failed_count >= cfg.failed_tests_high_at_or_above
        ):
            level = "high"
    names = f": {', '.join(_shown(name) for name in failing)}" if failing else ""
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
            detail=f"{failed_count} failed test{'s' if failed_count != 1 else ''}{names}",
        )
    )
    critical_failures, areas = _in_critical_areas(failing, cfg)
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
                + ", ".join(_shown(name) for name in critical_failures),
                areas=tuple(areas),
            )
        )
    risky, areas = _in_critical_areas(changes, cfg)
    if risky and failed_count > 0:
        signals.append(
            Signal(
                name="risky_changes_with_failures",
                label="Risky changes together with failed tests",
                level=cfg.risky_changes_with_failures_level,
                critical=True,
                figure=failed_count,
                threshold=f"{cfg.risky_changes_with_failures_level} when a change touches a "
                "critical area and any test fails",
                detail=f"{len(risky)} change{'s' if len(risky) != 1 else ''} in "
                f"{', '.join(areas)} and {failed_count} failed test"
                f"{'s' if failed_count != 1 else ''}",
                areas=tuple(areas),
            )
        )
    skipped, passed = _number(tests.get("skipped")), _number(tests.get("passed"))
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
                    threshold=f"low from {_pct(cfg.skipped_share_low_at_or_above)} skipped",
                    detail=f"{int(skipped)} of {int(total)} tests skipped ({share * 100:.0f} %)",
                )
            )
    return signals


def _in_critical_areas(texts: Sequence[str], cfg: PolicySettings) -> tuple[list[str], list[str]]:
    """The texts that touch a critical area, and those areas (sorted)."""
    found = {text: areas_in(text, cfg.critical_areas) for text in texts}
    touching = [text for text in texts if found[text]]
    return touching, sorted({area for areas in found.values() for area in areas})


def _risky_changes(changes: Sequence[str], cfg: PolicySettings) -> Signal | None:
    risky, areas = _in_critical_areas(changes, cfg)
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


def _instructions(summary: Mapping[str, Any], cfg: PolicySettings) -> Signal | None:
    found = instruction_like_texts(summary)
    if not found:
        return None
    # Where, not what: the signals reach the model, and the text itself must not.
    places = ", ".join(where for where, _ in found[:5])
    return Signal(
        name="instructions_in_data",
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
    """
    cfg = cfg or PolicySettings()
    signals: list[Signal] = []
    raw_changes = summary.get("changes")
    changes = (
        [c for c in raw_changes if isinstance(c, str)] if isinstance(raw_changes, list) else []
    )
    if not changes:
        signals.append(_missing("changes", MISSING_LABELS["changes"], cfg))
    tests = summary.get("tests")
    if isinstance(tests, Mapping) and tests:
        signals += _tests(tests, changes, cfg)
    else:
        signals.append(_missing("tests", MISSING_LABELS["tests"], cfg))
    metrics = summary.get("deployment_metrics")
    if isinstance(metrics, Mapping) and metrics:
        rate = _number(metrics.get("error_rate"))
        if rate is None:
            signals.append(
                _missing(
                    "deployment_metrics.error_rate",
                    MISSING_LABELS["deployment_metrics.error_rate"],
                    cfg,
                )
            )
        else:
            signals.append(_error_rate(rate, cfg))
        p95 = _number(metrics.get("response_time_p95"))
        if p95 is None:
            signals.append(
                _missing(
                    "deployment_metrics.response_time_p95",
                    MISSING_LABELS["deployment_metrics.response_time_p95"],
                    cfg,
                )
            )
        else:
            own = _number(metrics.get("response_time_p95_baseline"))
            baseline, baseline_from = (
                (own, "its baseline") if own is not None else (previous_p95, "the previous release")
            )
            signals += _latency(p95, baseline, baseline_from, cfg)
    else:
        signals.append(_missing("deployment_metrics", MISSING_LABELS["deployment_metrics"], cfg))
    risky = _risky_changes(changes, cfg)
    if risky is not None:
        signals.append(risky)
    instructions = _instructions(summary, cfg)
    if instructions is not None:
        signals.append(instructions)
    return PolicyVerdict(severity=severity_of(signals), signals=tuple(signals))
