"""What the release data and the policy's verdict say, as numbers with their meaning: the
known figures a report's figures are matched against (`grounding.py`, rules 1 to 3 and 6).

Every number is kept with its kind (a count, a fraction, a latency in milliseconds, a ratio,
or unknown), the measure it belongs to, and whether it is one of the policy's limits.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from risk.figures import extract_figures
from risk.policy import PolicySettings, PolicyVerdict, areas_in, risky_changes
from risk.signal import number

# What a known number is, for rule 6: a count, a fraction (a rate or a share, 0.071), a
# latency in milliseconds, a ratio ("1.4 times"), or a number whose meaning is unknown.
Kind = Literal["count", "fraction", "ms", "ratio", "any"]


@dataclass(frozen=True, slots=True)
class Known:
    value: float
    source: str
    kind: Kind = "any"
    # The measure it belongs to ("error rate", "latency", "tests", "changes"), if one.
    measure: str | None = None
    # A policy's limit: evidence only for a figure the text calls a limit ("above the 5 %
    # threshold"), never for the measure itself ("error rate at 2 %").
    limit: bool = False


# A finite number, or None: a value that cannot be read grounds nothing.
_number = number


_PLAIN_NAMES = {
    "tests.passed": ("passed tests", "count", "tests"),
    "tests.failed": ("failed tests", "count", "tests"),
    "tests.skipped": ("skipped tests", "count", "tests"),
    "tests.not_in_test_cases": ("subtests", "count", "tests"),
    "tests.failed_subtests": ("failed subtests", "count", "tests"),
    "deployment_metrics.error_rate": ("the error rate", "fraction", "error rate"),
    "deployment_metrics.response_time_p95": ("the p95 latency", "ms", "latency"),
    "deployment_metrics.response_time_p95_baseline": (
        "the p95 latency's baseline",
        "ms",
        "latency",
    ),
}
_LIMITED_DETAILS = frozenset({"error_rate", "p95_latency", "p95_change"})
_SIGNAL_KINDS: dict[str, tuple[Kind, str | None]] = {
    "error_rate": ("fraction", "error rate"),
    "p95_latency": ("ms", "latency"),
    "p95_change": ("fraction", "latency"),
    "failed_tests": ("count", "tests"),
    "critical_area_failures": ("count", "tests"),
    "risky_changes_with_failures": ("count", "tests"),
    "skipped_tests": ("count", "tests"),
    "risky_changes": ("count", "changes"),
    "no_tests_ran": ("count", "tests"),
    "partial_test_run": ("count", "tests"),
    # From the release's history (history_signals.py): "failed in 4 of the last 10 releases"
    # is grounded by these only (grounding's history rule).
    "known_flaky_failures": ("count", "history"),
    "new_failures": ("count", "history"),
    "correlated_failures": ("count", "tests"),
    "change_size": ("count", "changes"),
    "critical_paths": ("count", "changes"),
    "new_authors": ("count", "changes"),
}
# Signals whose figure is a count of this release's failing tests.
_FAILURE_SIGNALS = frozenset(
    {"critical_area_failures", "known_flaky_failures", "new_failures", "correlated_failures"}
)


def _in_text(text: str, source: str, measure: str | None = None) -> Iterable[Known]:
    """The figures of a text of the data, each read with its unit (rule 6)."""
    for figure in extract_figures(text):
        if figure.unit == "%":
            yield Known(figure.value / 100, source, "fraction", measure)
        elif figure.unit == "ms":
            yield Known(figure.value, source, "ms", measure)
        elif figure.unit == "s":
            yield Known(figure.value * 1000, source, "ms", measure)
        else:
            yield Known(figure.value, source, "any", measure)


def _plain_source(path: str) -> str:
    if path.startswith("changes["):
        return "the list of changes"
    if path.startswith("tests.failing_tests"):
        return "the failing tests' names"
    if path.startswith("deployment_metrics."):
        return f"the metric {path.split('.', 1)[1]}"
    return path


def _leaves(value: Any, path: str) -> Iterable[Known]:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        source, kind, measure = _PLAIN_NAMES.get(path, (_plain_source(path), "any", None))
        yield Known(float(value), source, kind, measure)  # type: ignore[arg-type]
    elif isinstance(value, str):
        yield from _in_text(value, _plain_source(path))
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _leaves(inner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for i, inner in enumerate(value):
            yield from _leaves(inner, f"{path}[{i}]")


@dataclass(frozen=True, slots=True)
class Facts:
    """What the data says, arranged for the rules above."""

    direct: list[Known]
    tests: dict[str, float] | None
    failures: set[float]
    shares: list[Known]
    rises: list[Known]
    distances: list[Known]
    change_counts: list[Known]
    failed: float | None
    # The figures the run's drill-downs showed (test histories, lines changed, a metric's
    # medians): evidence for a figure, a count next to a test word included.
    investigated: list[Known] = dataclasses.field(default_factory=list)


def facts(
    data: Mapping[str, Any],
    verdict: PolicyVerdict | None,
    cfg: PolicySettings,
    extra_known: Sequence[float],
    investigated: Sequence[float] = (),
) -> Facts:
    direct = list(_leaves({k: data.get(k) for k in ("changes", "tests", "deployment_metrics")}, ""))
    direct += [Known(v, "the summary the model read") for v in extra_known]
    drilled = [Known(v, "what the drill-downs showed") for v in investigated]
    direct += drilled
    if verdict is not None:
        for signal in verdict.signals:
            kind, measure = _SIGNAL_KINDS.get(signal.name, ("any", None))
            source = f"the policy's {signal.label.lower()}"
            # A rise is a derived figure: it counts only where the text says so (rule 3).
            derived = signal.name == "p95_change"
            if (
                isinstance(signal.figure, int | float)
                and not isinstance(signal.figure, bool)
                and not derived
            ):
                direct.append(Known(float(signal.figure), source, kind, measure))
            direct += [
                dataclasses.replace(k, limit=True)
                for k in _in_text(signal.threshold, f"{source} limit", measure)
            ]
            # The details are shown to the model as facts ("40 of 160 tests skipped (25 %)");
            # the metrics' details add only their limits (above) to their own figure, and a
            # rise stays a derived figure (rule 3).
            if signal.name not in _LIMITED_DETAILS:
                direct += _in_text(signal.detail, source, measure)

    tests_raw = data.get("tests")
    tests: dict[str, float] | None = None
    failures: set[float] = set()
    shares: list[Known] = []
    failed: float | None = None
    if isinstance(tests_raw, Mapping) and tests_raw:
        tests = {}
        for key in ("passed", "failed", "skipped"):
            value = _number(tests_raw.get(key))
            if value is not None:
                tests[key] = value
        failing = [t for t in tests_raw.get("failing_tests") or [] if isinstance(t, str)]
        parts = list(tests.values())
        tests["total"] = sum(parts)
        tests["executed"] = tests.get("passed", 0) + tests.get("failed", 0)
        tests["failing tests named"] = float(len(failing))
        failed = tests.get("failed", float(len(failing)))
        failures = {failed, float(len(failing))}
        for area in cfg.critical_areas:
            in_area = [t for t in failing if area in areas_in(t, cfg.critical_areas)]
            if in_area:
                failures.add(float(len(in_area)))
                tests[f"failing tests in {area}"] = float(len(in_area))
        # "7 failing tests in data, migrations, payments": the policy counts them together.
        critical = [t for t in failing if areas_in(t, cfg.critical_areas)]
        if critical:
            failures.add(float(len(critical)))
            tests["failing tests in a critical area"] = float(len(critical))
        # With a history, the policy counts known-flaky failures apart from the others.
        for signal in verdict.signals if verdict is not None else ():
            if signal.name in _FAILURE_SIGNALS and isinstance(signal.figure, int):
                failures.add(float(signal.figure))
        for key in ("passed", "failed", "skipped"):
            for denominator in ("total", "executed"):
                if key in tests and tests[denominator]:
                    shares.append(
                        Known(
                            tests[key] / tests[denominator],
                            f"the share of {key} tests ({denominator})",
                            "fraction",
                            "tests",
                        )
                    )

    rises: list[Known] = []
    distances: list[Known] = []
    metrics = data.get("deployment_metrics")
    if isinstance(metrics, Mapping):
        p95 = _number(metrics.get("response_time_p95"))
        baselines = [_number(metrics.get("response_time_p95_baseline"))]
        if verdict is not None:
            baselines += [_baseline_of(s.detail) for s in verdict.signals if s.name == "p95_change"]
        for base in baselines:
            if p95 is not None and base:
                direct.append(Known(base, "the p95 latency it is compared with", "ms", "latency"))
                rises += [
                    Known(p95 - base, "the p95 latency's rise (ms)", "ms", "latency"),
                    Known((p95 - base) / base, "the p95 latency's rise", "fraction", "latency"),
                    Known(p95 / base, "the p95 latency against its baseline", "ratio", "latency"),
                ]
        rate = _number(metrics.get("error_rate"))
        if rate is not None:
            for threshold in (cfg.error_rate_medium_at_or_above, cfg.error_rate_high_above):
                if not threshold:
                    continue
                distances += [
                    Known(
                        abs(rate - threshold),
                        "the error rate's distance to a limit",
                        "fraction",
                        "error rate",
                    ),
                    Known(rate / threshold, "the error rate over a limit", "ratio", "error rate"),
                    Known(
                        abs(rate - threshold) / threshold,
                        "the error rate over a limit",
                        "fraction",
                        "error rate",
                    ),
                ]
    change_counts: list[Known] = []
    changes = data.get("changes")
    if isinstance(changes, list):
        change_counts.append(
            Known(float(len(changes)), "the number of changes", "count", "changes")
        )
        risky, _ = risky_changes([c for c in changes if isinstance(c, str)], cfg)
        change_counts.append(
            Known(float(len(risky)), "changes in a critical area", "count", "changes")
        )
    return Facts(direct, tests, failures, shares, rises, distances, change_counts, failed, drilled)


_BASELINE_RE = re.compile(r"against ([\d,]+(?:\.\d+)?) ms")


def _baseline_of(detail: str) -> float | None:
    match = _BASELINE_RE.search(detail)
    return float(match.group(1).replace(",", "")) if match else None
