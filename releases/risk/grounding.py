"""Is a report grounded in the release data? Every figure found, every claim of failure backed.

The rules, for each finding and the summary:

1. A figure (see `figures.py`) must be a number of the release data, of the policy's
   thresholds and signals shown to the model, or of `extra_known` (the evals add the prompt
   and the tools' error texts). `0.042`, `4.2%` and `4.2 %` are one value.
2. A count next to a test word (`2 failed tests`, `tests failed: 2`) is a test count: it must
   be one of the release's test counts (passed, failed, skipped, their totals, the failing
   tests named, those of one critical area). A release without test results has none.
3. Derived figures count only when the text says what they are derived from, never by
   numeric coincidence: a p95 rise (`up 27 %`, `+110 ms`) needs a word of change next to it
   (up, rise, increase, slower, against, baseline, previous ...); an error rate's distance to a
   threshold needs one of above, below, over, under, points; a share of tests needs a test
   word; the number of changes needs the word change.
4. A small bare integer (0 to 10) with no unit and no test word is prose (`3 risks`).
5. A claim that tests fail (`payment tests failing`, `1 failed UI test`) needs failed tests;
   a figure said to be above (below) another must be so (`0.012 is above the 0.05 threshold`
   is refused).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from releases.risk.figures import Figure, extract_figures, numbers_in
from releases.risk.policy import PolicySettings, PolicyVerdict, areas_in

SMALL_COUNT_MAX = 10
_WORD_RE = re.compile(r"[a-z0-9]+")
_TEST_WORDS = ("test", "fail", "pass", "skip", "flak")
_FAIL_WORDS = ("fail", "broke")
_NEGATIONS = frozenset({"no", "not", "zero", "0", "none", "without", "never", "nor", "neither"})
_CHANGE_WORDS = (
    "up", "down", "rise", "rose", "increase", "decrease", "higher", "lower", "slower",
    "faster", "against", "baseline", "previous", "regress", "jump", "grew", "grow", "more",
    "less", "from", "drop", "worse", "better", "change", "delta",
)  # fmt: skip
_THRESHOLD_WORDS = ("threshold", "limit", "from")
_DISTANCE_WORDS = ("above", "below", "over", "under", "point", "pp", "exceed", "beyond", "times")
_ABOVE = ("above", "over", "exceeds", "exceed", "exceeding", "higher than", "greater than")
_BELOW = ("below", "under", "lower than", "less than", "within")
_AND_RE = re.compile(r"\b(and|while|but|whereas)\b", re.IGNORECASE)
_COMPARISON_RE = re.compile(
    r"\b(" + "|".join(re.escape(w) for w in (*_ABOVE, *_BELOW)) + r")\b", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Known:
    value: float
    source: str


@dataclass(slots=True)
class TextGrounding:
    """One finding (or the summary): the evidence its figures rest on, and what is not."""

    where: str
    text: str
    evidence: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)

    @property
    def grounded(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "text": self.text,
            "evidence": self.evidence,
            "problems": self.problems,
            "signals": self.signals,
            "grounded": self.grounded,
        }


@dataclass(slots=True)
class ReportGrounding:
    parts: list[TextGrounding]

    @property
    def grounded(self) -> bool:
        return all(part.grounded for part in self.parts)

    def problems(self) -> list[str]:
        return [
            f"{p.where} {p.text[:200]!r}: {problem}" for p in self.parts for problem in p.problems
        ]

    def as_list(self) -> list[dict[str, Any]]:
        return [part.as_dict() for part in self.parts]


def _number(value: Any) -> float | None:
    """A finite number, or None: a value that cannot be read grounds nothing."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _leaves(value: Any, path: str) -> Iterable[Known]:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        yield Known(float(value), path)
    elif isinstance(value, str):
        for number in numbers_in(value):
            yield Known(number, path)
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _leaves(inner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for i, inner in enumerate(value):
            yield from _leaves(inner, f"{path}[{i}]")


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the data says, arranged for the rules above."""

    direct: list[Known]
    tests: dict[str, float] | None
    failures: set[float]
    shares: list[Known]
    rises: list[Known]
    distances: list[Known]
    change_counts: list[Known]
    failed: float | None


def _facts(
    data: Mapping[str, Any],
    verdict: PolicyVerdict | None,
    cfg: PolicySettings,
    extra_known: Sequence[float],
) -> _Facts:
    direct = list(_leaves({k: data.get(k) for k in ("changes", "tests", "deployment_metrics")}, ""))
    direct += [Known(v, "the task") for v in extra_known]
    if verdict is not None:
        for signal in verdict.signals:
            # A rise is a derived figure: it counts only where the text says so (rule 3).
            derived = signal.name == "p95_change"
            if (
                isinstance(signal.figure, int | float)
                and not isinstance(signal.figure, bool)
                and not derived
            ):
                direct.append(Known(float(signal.figure), f"policy signal {signal.name}"))
            for number in numbers_in(signal.threshold):
                direct.append(Known(number, f"policy threshold of {signal.name}"))
            # The details are shown to the model as facts ("40 of 160 tests skipped (25 %)");
            # a rise stays a derived figure (rule 3).
            for number in [] if derived else numbers_in(signal.detail):
                direct.append(Known(number, f"policy signal {signal.name}"))

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
        for key in ("passed", "failed", "skipped"):
            for denominator in ("total", "executed"):
                if key in tests and tests[denominator]:
                    shares.append(Known(tests[key] / tests[denominator], f"{key} / {denominator}"))

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
                direct.append(Known(base, "p95 of the baseline or previous release"))
                rises += [
                    Known(p95 - base, "p95 against its baseline (ms)"),
                    Known((p95 - base) / base, "p95 rise against its baseline"),
                    Known(p95 / base, "p95 against its baseline (times)"),
                ]
        rate = _number(metrics.get("error_rate"))
        if rate is not None:
            for threshold in (cfg.error_rate_medium_at_or_above, cfg.error_rate_high_above):
                if not threshold:
                    continue
                distances += [
                    Known(abs(rate - threshold), "error rate against a threshold"),
                    Known(rate / threshold, "error rate over a threshold (times)"),
                    Known(abs(rate - threshold) / threshold, "error rate over a threshold"),
                ]
    change_counts: list[Known] = []
    changes = data.get("changes")
    if isinstance(changes, list):
        change_counts.append(Known(float(len(changes)), "number of changes"))
        risky = [c for c in changes if isinstance(c, str) and areas_in(c, cfg.critical_areas)]
        change_counts.append(Known(float(len(risky)), "changes in a critical area"))
    return _Facts(direct, tests, failures, shares, rises, distances, change_counts, failed)


_BASELINE_RE = re.compile(r"against ([\d.]+) ms")


def _baseline_of(detail: str) -> float | None:
    match = _BASELINE_RE.search(detail)
    return float(match.group(1)) if match else None


def _near(text: str, figure: Figure, before: int = 2, after: int = 3) -> list[str]:
    head = _WORD_RE.findall(text[: figure.start].lower())[-before:] if before else []
    tail = _WORD_RE.findall(text[figure.start + len(figure.text) :].lower())[:after]
    return [*head, *tail]


def _test_word(text: str, figure: Figure) -> str | None:
    """The test word a count belongs to: among the words right after it ("8 failed tests",
    "2 skipped"), else right before it ("failed: 2"); None when neither has one."""
    after = _WORD_RE.findall(text[figure.start + len(figure.text) :].lower())[:3]
    before = _WORD_RE.findall(text[: figure.start].lower())[-2:]
    for words in (after, list(reversed(before))):
        kinds = [p for w in words for p in _TEST_WORDS if w.startswith(p)]
        # "2 payment tests failing": the generic "test" gives way to what the tests did.
        specific = [k for k in kinds if k != "test"]
        if specific:
            return specific[0]
        if kinds:
            return kinds[0]
    return None


def _test_counts(kind: str, facts: _Facts) -> list[Known]:
    """The counts a figure next to this test word may be. Failures are held to the failure
    counts; "40 of 160 tests skipped" names a total beside a skip count, so other test words
    accept any of the release's test counts."""
    if kind in _FAIL_WORDS:
        return [Known(v, "failed tests") for v in sorted(facts.failures)]
    return [Known(v, f"tests: {k}") for k, v in (facts.tests or {}).items()]


def _has(words: Iterable[str], prefixes: Sequence[str]) -> bool:
    return any(w.startswith(prefixes) for w in words)


def _match(figure: Figure, known: Iterable[Known]) -> Known | None:
    for k in known:
        if figure.matches([k.value]):
            return k
    return None


def _ground_figure(text: str, figure: Figure, facts: _Facts) -> tuple[str | None, str | None]:
    """(evidence, problem) for one figure; both None when it is prose."""
    is_count = not figure.unit and not figure.decimals
    kind = _test_word(text, figure) if is_count else None
    if kind is not None and _has(_near(text, figure, before=3, after=0), _THRESHOLD_WORDS):
        # "below the threshold of 1 failed test": the policy's number, not a test count.
        found = _match(figure, [k for k in facts.direct if k.source.startswith("policy")])
        if found is not None:
            return f"{figure.text} = {found.source}", None
    if kind is not None:
        if facts.tests is None:
            return (
                None,
                f"{figure.text} is given as a test count, but the release has no test results",
            )
        counts = _test_counts(kind, facts)
        found = _match(figure, counts)
        if found is None:
            allowed = ", ".join(sorted({f"{k.value:g}" for k in counts})) or "none"
            return None, f"{figure.text} is not one of the release's test counts ({allowed})"
        return f"{figure.text} = {found.source}", None
    if is_count and figure.value <= SMALL_COUNT_MAX:
        return None, None
    found = _match(figure, facts.direct)
    if found is not None:
        return f"{figure.text} = {found.source}", None
    wide = _near(text, figure, before=4, after=4)
    derived: list[Known] = []
    if _has(wide, _CHANGE_WORDS):
        derived += facts.rises
    if _has(wide, _DISTANCE_WORDS):
        derived += facts.distances
    if _has(wide, _TEST_WORDS):
        derived += facts.shares
    if _has(wide, ("change",)):
        derived += facts.change_counts
    found = _match(figure, derived)
    if found is not None:
        return f"{figure.text} = {found.source}", None
    return None, f"{figure.text} is not in the release data"


def _claims_failures(text: str) -> bool:
    """Does the text say that tests fail (not that none do)?"""
    words = _WORD_RE.findall(text.lower())
    for i, word in enumerate(words):
        if not word.startswith(_FAIL_WORDS[:1]):
            continue
        window = words[max(0, i - 4) : i + 4]
        if not any(w.startswith("test") for w in window):
            continue
        # "no failed tests", "Failed tests: 0", "failures: none"
        if _NEGATIONS & set(words[max(0, i - 4) : i + 4]):
            continue
        # "below the threshold of 1 failed test" speaks of the policy, not of the release.
        if any(w.startswith(_THRESHOLD_WORDS[:2]) for w in words[max(0, i - 4) : i]):
            continue
        return True
    return False


def _comparison_problems(text: str, figures: Sequence[Figure]) -> list[str]:
    problems = []
    for a, b in itertools.pairwise(figures):
        between = text[a.start + len(a.text) : b.start]
        # "above 0.05, and a p95 latency above 1000 ms": the second "above" has its own subject.
        if len(between) > 60 or any(c in between for c in ".;") or _AND_RE.search(between):
            continue
        match = _COMPARISON_RE.search(between)
        if match is None:
            continue
        x, y = _on_one_scale(a, b)
        if x is None or y is None:
            continue
        op = match.group(1).lower()
        if (op in _ABOVE and x <= y) or (op in _BELOW and op != "within" and x >= y):
            problems.append(f"{a.text} is not {op} {b.text}")
    return problems


def _on_one_scale(a: Figure, b: Figure) -> tuple[float | None, float | None]:
    def as_rate(f: Figure) -> float | None:
        if f.unit == "%":
            return f.value / 100
        if not f.unit and f.value <= 1 and f.decimals:
            return f.value
        return None

    rate_a, rate_b = as_rate(a), as_rate(b)
    if rate_a is not None and rate_b is not None:
        return rate_a, rate_b
    if a.unit in ("ms", "s") and b.unit in ("ms", "s"):

        def ms(f: Figure) -> float:
            return f.value * 1000 if f.unit == "s" else f.value

        return ms(a), ms(b)
    return None, None


def _signals_cited(text: str, verdict: PolicyVerdict | None, evidence: Sequence[str]) -> list[str]:
    if verdict is None:
        return []
    lowered = text.lower()
    cited = []
    for signal in verdict.signals:
        by_figure = any(signal.name in e for e in evidence)
        by_words = {
            "error_rate": "error" in lowered,
            "p95_latency": "p95" in lowered or "latency" in lowered,
            "p95_change": "p95" in lowered or "latency" in lowered,
            "failed_tests": "fail" in lowered,
            "critical_area_failures": "fail" in lowered and any(a in lowered for a in signal.areas),
            "risky_changes": any(a.rstrip("s") in lowered for a in signal.areas),
            "instructions_in_data": "instruction" in lowered or "injection" in lowered,
        }.get(signal.name, signal.name.startswith("missing_") and "missing" in lowered)
        if by_figure or by_words:
            cited.append(signal.name)
    return cited


def ground_text(
    where: str,
    text: str,
    data: Mapping[str, Any],
    verdict: PolicyVerdict | None = None,
    cfg: PolicySettings | None = None,
    *,
    extra_known: Sequence[float] = (),
    facts: _Facts | None = None,
) -> TextGrounding:
    cfg = cfg or PolicySettings()
    facts = facts or _facts(data, verdict, cfg, extra_known)
    result = TextGrounding(where=where, text=text)
    figures = extract_figures(text)
    for figure in figures:
        evidence, problem = _ground_figure(text, figure, facts)
        if evidence:
            result.evidence.append(evidence)
        if problem:
            result.problems.append(problem)
    if _claims_failures(text) and not facts.failed:
        if facts.tests is None:
            result.problems.append("it claims failed tests, but the release has no test results")
        else:
            result.problems.append("it claims failed tests, but the release has 0 failed tests")
    result.problems += _comparison_problems(text, figures)
    result.signals = _signals_cited(text, verdict, result.evidence)
    return result


def ground_report(
    findings: Sequence[str],
    summary: str,
    data: Mapping[str, Any],
    verdict: PolicyVerdict | None = None,
    cfg: PolicySettings | None = None,
    *,
    extra_known: Sequence[float] = (),
) -> ReportGrounding:
    """The grounding of every finding and of the summary, against the release data."""
    cfg = cfg or PolicySettings()
    facts = _facts(data, verdict, cfg, extra_known)
    parts = [
        ground_text(f"finding {i}", text, data, verdict, cfg, facts=facts)
        for i, text in enumerate(findings, start=1)
    ]
    if summary.strip():
        parts.append(ground_text("summary", summary, data, verdict, cfg, facts=facts))
    return ReportGrounding(parts)
