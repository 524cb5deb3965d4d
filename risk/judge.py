"""The metric judge: a release's metric samples against a baseline's, metric by metric, in the
manner of Kayenta's canary judge, and in words.

For each metric the judge has two windows of samples (the baseline's and this release's) and
the metric's settings (`MetricSettings`):

1. **Enough data?** Fewer samples than `JudgeSettings.min_samples` in either window is its own
   outcome, `too_little_data`: never a pass, since nothing was shown to be fine.
2. **A shift in the bad direction?** The Mann-Whitney U test (scipy.stats.mannwhitneyu's
   figures, computed without importing scipy: risk/mannwhitney.py), one sided: "this
   release's values tend to be larger than the baseline's" for a metric where an increase is
   bad (error rate, latency), "smaller" where a decrease is. The shift is significant when
   p < 1 - confidence. The test is on ranks, so it asks nothing of the samples' distribution
   (latencies are far from normal) and one outlier cannot carry it.
3. **How large?** The effect size is the ratio of this release's median to the baseline's (of
   the means with `effect = "mean"`), taken in the bad direction: current / baseline where an
   increase is bad, baseline / current where a decrease is. It must be above `allowed_ratio`.
4. **Large enough to matter?** The absolute change (in the metric's own units) must be at
   least `min_absolute_change`, so that 2 ms -> 5 ms (2.5 times!) is not a signal on its own.

A metric fails when all of 2, 3 and 4 hold, and passes otherwise; `reason` says which held.
The overall outcome: a failing *critical* metric vetoes (fail, whatever the others say);
otherwise the release fails when the share of judged metrics that pass is under
`pass_share_at_or_above` (1.0 by default: any failing metric fails it); otherwise a metric
with too little data makes the whole judgement `too_little_data`; only then is it a pass.

Every metric's judgement carries a sentence with its figures and units ("p95 latency rose
from a median of 420 ms to 910 ms over 60 samples each (Mann-Whitney p < 0.001), 2.2 times
the baseline, above the 1.5 times allowed."); error rates are written as percentages.

Plain Python (no Django), for the risk policy and the release API's metric history (issue #20).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    import numpy as np

Outcome = Literal["pass", "fail", "too_little_data"]
Reason = Literal[
    "regressed",  # fail: significant, above the allowed ratio, and large enough
    "not_significant",
    "within_allowed",
    "below_minimum_change",
    "improved",  # moved in the good direction
    "unchanged",
    "too_few_samples",
]
Direction = Literal["increase", "decrease"]
Effect = Literal["median", "mean"]


class MetricSettings(BaseModel):
    """How one metric is judged and written about."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(
        "", description='The metric in a sentence ("p95 latency"); the name if empty.'
    )
    unit: str = Field("", description='Written after figures ("ms"); ignored with `percent`.')
    # The samples are fractions written as percentages (an error rate of 0.015 is "1.5 %").
    percent: bool = False
    bad_direction: Direction = "increase"
    effect: Effect = "median"
    # The largest change in the bad direction that is still fine, as a ratio to the baseline.
    allowed_ratio: float = Field(1.5, ge=1.0)
    # The smallest change in the bad direction, in the metric's own units, that can fail it.
    min_absolute_change: float = Field(0.0, ge=0.0)
    # A failing critical metric fails the whole judgement (a veto).
    critical: bool = False


DEFAULT_METRICS: dict[str, MetricSettings] = {
    "error_rate": MetricSettings(
        label="error rate",
        percent=True,
        allowed_ratio=1.5,
        min_absolute_change=0.005,  # half a percentage point
        critical=True,
    ),
    "response_time_p95": MetricSettings(
        label="p95 latency", unit="ms", allowed_ratio=1.5, min_absolute_change=50.0
    ),
    "response_time_p50": MetricSettings(
        label="p50 latency", unit="ms", allowed_ratio=1.5, min_absolute_change=25.0
    ),
}


class JudgeSettings(BaseModel):
    """Every setting of the judge. Metrics without settings of their own get `default_metric`
    (with their name as label)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The Mann-Whitney shift is significant when p < 1 - confidence.
    confidence: float = Field(0.95, gt=0.0, lt=1.0)
    # Fewer samples than this in either window: too little data. Below ~20 a side the
    # test's normal approximation is rough, and at 3 a side no p-value can go under 0.05.
    min_samples: int = Field(20, ge=1)
    # The share of judged metrics that must pass (critical failures veto whatever it is).
    pass_share_at_or_above: float = Field(1.0, ge=0.0, le=1.0)
    metrics: dict[str, MetricSettings] = Field(
        default_factory=lambda: {name: m.model_copy() for name, m in DEFAULT_METRICS.items()}
    )
    default_metric: MetricSettings = Field(default_factory=MetricSettings)

    def for_metric(self, name: str) -> MetricSettings:
        settings = self.metrics.get(name)
        if settings is not None:
            return settings if settings.label else settings.model_copy(update={"label": name})
        return self.default_metric.model_copy(update={"label": self.default_metric.label or name})

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence


@dataclass(frozen=True, slots=True)
class Window:
    """One window's samples, summarised."""

    n: int
    median: float | None = None
    mean: float | None = None
    q1: float | None = None  # the 25th and 75th percentiles: the spread
    q3: float | None = None

    @classmethod
    def of(cls, values: np.ndarray) -> Window:
        if values.size == 0:
            return cls(n=0)
        q1, median, q3 = _numpy().percentile(values, [25, 50, 75])
        return cls(
            n=int(values.size),
            median=float(median),
            mean=float(values.mean()),
            q1=float(q1),
            q3=float(q3),
        )

    def centre(self, effect: Effect) -> float | None:
        return self.median if effect == "median" else self.mean


@dataclass(frozen=True, slots=True)
class MetricJudgement:
    name: str
    label: str
    outcome: Outcome
    reason: Reason
    critical: bool
    baseline: Window
    current: Window
    effect: Effect
    bad_direction: Direction
    # The one-sided Mann-Whitney p-value for a shift in the bad direction (None: not tested).
    p_value: float | None
    # current / baseline of the effect measure (None: not judged or the baseline's is 0).
    ratio: float | None
    # The change in the bad direction, as a ratio (>= 1 is worse) and in the metric's units.
    worsening: float | None
    absolute_change: float | None
    allowed_ratio: float
    min_absolute_change: float
    confidence: float
    sentence: str

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data (an infinite ratio, from a baseline of 0, is None)."""
        data = asdict(self)
        for key in ("ratio", "worsening"):
            if data[key] is not None and not math.isfinite(data[key]):
                data[key] = None
        return data


@dataclass(frozen=True, slots=True)
class Judgement:
    outcome: Outcome
    metrics: tuple[MetricJudgement, ...]
    # The critical metrics that failed (and so decided the outcome on their own).
    vetoed_by: tuple[str, ...]
    # The share of judged metrics (enough data) that passed; None when none could be judged.
    pass_share: float | None
    sentence: str

    def metric(self, name: str) -> MetricJudgement | None:
        return next((m for m in self.metrics if m.name == name), None)

    def sentences(self) -> list[str]:
        """The overall sentence, then one per metric, failures first."""
        order = {"fail": 0, "too_little_data": 1, "pass": 2}
        ranked = sorted(self.metrics, key=lambda m: (order[m.outcome], not m.critical))
        return [self.sentence, *(m.sentence for m in ranked)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "metrics": [m.as_dict() for m in self.metrics],
            "vetoed_by": list(self.vetoed_by),
            "pass_share": self.pass_share,
            "sentence": self.sentence,
        }


def judge(
    baseline: Mapping[str, Sequence[float]],
    current: Mapping[str, Sequence[float]],
    settings: JudgeSettings | None = None,
) -> Judgement:
    """Judge every metric found in either window (in name order), and the whole."""
    settings = settings or JudgeSettings()
    names = sorted(set(baseline) | set(current))
    metrics = tuple(
        judge_metric(name, baseline.get(name, ()), current.get(name, ()), settings)
        for name in names
    )
    return _overall(metrics, settings)


def judge_metric(
    name: str,
    baseline: Sequence[float],
    current: Sequence[float],
    settings: JudgeSettings | None = None,
) -> MetricJudgement:
    settings = settings or JudgeSettings()
    metric = settings.for_metric(name)
    base_values, current_values = (
        _samples(name, "baseline", baseline),
        _samples(name, "release", current),
    )
    base, now = Window.of(base_values), Window.of(current_values)
    fields: dict[str, Any] = {
        "name": name,
        "label": metric.label,
        "critical": metric.critical,
        "baseline": base,
        "current": now,
        "effect": metric.effect,
        "bad_direction": metric.bad_direction,
        "allowed_ratio": metric.allowed_ratio,
        "min_absolute_change": metric.min_absolute_change,
        "confidence": settings.confidence,
    }
    if base.n < settings.min_samples or now.n < settings.min_samples:
        return MetricJudgement(
            outcome="too_little_data",
            reason="too_few_samples",
            p_value=None,
            ratio=None,
            worsening=None,
            absolute_change=None,
            sentence=_too_little_sentence(metric, base.n, now.n, settings.min_samples),
            **fields,
        )
    worse = "greater" if metric.bad_direction == "increase" else "less"
    p_value = _mann_whitney().mannwhitneyu(current_values, base_values, worse)
    if math.isnan(p_value):  # no variation at all: nothing shifted
        p_value = 1.0
    before, after = base.centre(metric.effect), now.centre(metric.effect)
    assert before is not None and after is not None
    ratio = after / before if before != 0 else (1.0 if after == 0 else None)
    sign = 1.0 if metric.bad_direction == "increase" else -1.0
    absolute_change = sign * (after - before)
    worsening = _worsening(before, after, metric.bad_direction)
    if absolute_change == 0:
        outcome, reason = "pass", "unchanged"
    elif absolute_change < 0:
        outcome, reason = "pass", "improved"
    elif p_value >= settings.alpha:
        outcome, reason = "pass", "not_significant"
    elif worsening <= metric.allowed_ratio:
        outcome, reason = "pass", "within_allowed"
    elif absolute_change < metric.min_absolute_change:
        outcome, reason = "pass", "below_minimum_change"
    else:
        outcome, reason = "fail", "regressed"
    judgement = MetricJudgement(
        outcome=outcome,
        reason=reason,
        p_value=p_value,
        ratio=ratio,
        worsening=worsening,
        absolute_change=absolute_change,
        sentence="",
        **fields,
    )
    return _with_sentence(judgement, metric, settings)


def _numpy() -> ModuleType:
    import numpy

    return numpy


def warm_up_in_background() -> threading.Thread:
    """Import numpy and the U test on a thread now, so that a process that will judge metrics
    (the web server answering a run's summary, the eval runner) has them when the first
    request comes. Nothing on the judgement's path imports scipy (risk/mannwhitney.py: its
    import took 3.6-4.1 s under load, and a first summary waited over 10 s for it); numpy
    takes 0.2-0.5 s, so a request that comes before this thread is done waits at most that."""
    thread = threading.Thread(target=_mann_whitney, name="numpy-warm-up", daemon=True)
    thread.start()
    return thread


def _mann_whitney() -> ModuleType:
    """risk.mannwhitney (and numpy with it), imported on the first judgement rather than with
    this module: most processes that import the risk policy never judge a metric."""
    from risk import mannwhitney

    return mannwhitney


def _samples(name: str, window: str, values: Sequence[float]) -> np.ndarray:
    numpy = _numpy()
    try:
        array = numpy.asarray(values, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"metric {name!r}: the {window}'s samples are not numbers") from error
    if array.ndim != 1:
        raise ValueError(f"metric {name!r}: the {window}'s samples must be a flat list")
    if not numpy.isfinite(array).all():
        raise ValueError(f"metric {name!r}: the {window}'s samples include NaN or infinity")
    return array


def _worsening(before: float, after: float, bad_direction: Direction) -> float:
    """How many times worse, in the bad direction (1.0: the same; inf: from nothing)."""
    worse, better = (after, before) if bad_direction == "increase" else (before, after)
    if worse == better:
        return 1.0
    if better <= 0:
        return math.inf
    return worse / better


def _overall(metrics: tuple[MetricJudgement, ...], settings: JudgeSettings) -> Judgement:
    vetoed = tuple(m.name for m in metrics if m.critical and m.outcome == "fail")
    judged = [m for m in metrics if m.outcome != "too_little_data"]
    failed = [m for m in judged if m.outcome == "fail"]
    short = [m for m in metrics if m.outcome == "too_little_data"]
    share = (len(judged) - len(failed)) / len(judged) if judged else None
    outcome: Outcome
    if vetoed:
        outcome = "fail"
        sentence = (
            f"The metrics fail against the baseline: {_names(vetoed, metrics)} "
            f"{'is a critical metric' if len(vetoed) == 1 else 'are critical metrics'} "
            "and failed, which decides on its own."
        )
    elif share is not None and share < settings.pass_share_at_or_above:
        outcome = "fail"
        needed = (
            "all must pass"
            if settings.pass_share_at_or_above == 1.0
            else f"{_share(settings.pass_share_at_or_above)} must pass"
        )
        sentence = (
            f"The metrics fail against the baseline: {_names([m.name for m in failed], metrics)} "
            f"regressed; {_of(len(judged) - len(failed), len(judged))} passed, {needed}."
        )
    elif short or not metrics:
        outcome = "too_little_data"
        sentence = (
            "The metrics cannot be judged against the baseline: no metric samples."
            if not metrics
            else "The metrics cannot be judged against the baseline: too little data for "
            f"{_names([m.name for m in short], metrics)} (at least {settings.min_samples} "
            "samples needed in each window); a person should look."
        )
    else:
        outcome = "pass"
        sentence = (
            f"The metrics pass against the baseline: {_of(len(judged) - len(failed), len(judged))}"
            " within what is allowed."
        )
    return Judgement(
        outcome=outcome, metrics=metrics, vetoed_by=vetoed, pass_share=share, sentence=sentence
    )


# --------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------


def _with_sentence(
    m: MetricJudgement, metric: MetricSettings, settings: JudgeSettings
) -> MetricJudgement:
    before = m.baseline.centre(m.effect)
    after = m.current.centre(m.effect)
    assert before is not None and after is not None and m.p_value is not None
    measure = "a median" if m.effect == "median" else "a mean"
    samples = _samples_phrase(m.baseline.n, m.current.n)
    # Equal as written ("rose from 0.18 % to 0.18 %" was seen on a flat release): stayed.
    if before == after or (
        m.reason != "regressed" and _value(before, metric) == _value(after, metric)
    ):
        text = f"{_cap(m.label)} stayed at {measure} of {_value(after, metric)} {samples}"
        text += f" (Mann-Whitney p {_p(m.p_value)})."
        return _replace_sentence(m, text)
    verb = "rose" if after > before else "fell"
    text = (
        f"{_cap(m.label)} {verb} from {measure} of {_value(before, metric)} "
        f"to {_value(after, metric)} {samples}"
    )
    if m.reason == "improved":
        better = "lower" if m.bad_direction == "increase" else "higher"
        text += f"{_times_phrase(m)}: {better} is better for {m.label}."
        return _replace_sentence(m, text)
    text += f" (Mann-Whitney p {_p(m.p_value)}){_times_phrase(m)}"
    allowed = _number(m.allowed_ratio)
    if m.reason == "not_significant":
        noun = "rise" if after > before else "fall"
        text += f", not a significant {noun} at {_share(settings.confidence)} confidence."
    elif m.reason == "within_allowed":
        text += f", within the {allowed} times allowed."
    elif m.reason == "below_minimum_change":
        assert m.absolute_change is not None
        text += (
            f", but by {_change(m.absolute_change, metric)}, under the minimum of "
            f"{_change(metric.min_absolute_change, metric)} that counts as a change."
        )
    else:
        beyond = "above" if m.bad_direction == "increase" else "beyond"
        text += f", {beyond} the {allowed} times allowed."
        if m.critical:
            text += f" {_cap(m.label)} is a critical metric: this fails the judgement on its own."
    return _replace_sentence(m, text)


def _replace_sentence(m: MetricJudgement, text: str) -> MetricJudgement:
    return dataclasses.replace(m, sentence=text)


def _times_phrase(m: MetricJudgement) -> str:
    """The effect size in words: "2.2 times the baseline" ("2.5 times lower than the
    baseline" for a fall where a decrease is bad)."""

    def figure(value: float) -> str:
        return _ratio(value, m.allowed_ratio)

    if m.bad_direction == "decrease" and (m.absolute_change or 0.0) > 0:
        if m.worsening is None or math.isinf(m.worsening):
            return ", down to nothing"
        return f", {figure(m.worsening)} times lower than the baseline"
    if m.ratio is None:
        return ", up from nothing"
    return f", {figure(m.ratio)} times the baseline"


def _too_little_sentence(metric: MetricSettings, baseline_n: int, current_n: int, need: int) -> str:
    return (
        f"{_cap(metric.label)} cannot be judged: {_count(current_n)} in this release and "
        f"{_count(baseline_n)} in the baseline, at least {need} needed in each."
    )


def _samples_phrase(baseline_n: int, current_n: int) -> str:
    if baseline_n == current_n:
        return f"over {baseline_n:,} samples each"
    return f"over {baseline_n:,} baseline and {current_n:,} release samples"


def _count(n: int) -> str:
    return "no samples" if n == 0 else f"{n:,} sample{'s' if n != 1 else ''}"


def _of(k: int, n: int) -> str:
    return f"{k} of {n} judged metric{'s' if n != 1 else ''}"


def _names(names: Sequence[str], metrics: Sequence[MetricJudgement]) -> str:
    labels = {m.name: m.label for m in metrics}
    words = [labels.get(n, n) for n in names]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _cap(text: str) -> str:
    """The label at the start of a sentence: "Error rate", but "p95 latency" as it is."""
    first = text.split(" ", 1)[0]
    return text if any(ch.isdigit() for ch in first) else text[:1].upper() + text[1:]


def _p(p: float) -> str:
    if p < 0.001:
        return "< 0.001"
    return f"= {p:.3f}" if p < 0.01 else f"= {p:.2f}"


def _share(fraction: float) -> str:
    return f"{_number(fraction * 100)} %"


def _ratio(value: float, allowed: float | None = None) -> str:
    """A ratio as a whole number from 10 up ("15"), to one decimal from 2 up ("2.2"), to two
    below ("1.19", "0.46"), with more when it would otherwise read as the allowed ratio
    (1.503 is not written "1.50 times" beside "the 1.5 times allowed")."""
    first = 0 if value >= 10 else 1 if value >= 2 else 2
    for decimals in range(first, first + 4):
        if allowed is None or value == allowed or round(value, decimals) != allowed:
            break
    return f"{value:,.{decimals}f}"


def _value(value: float, metric: MetricSettings) -> str:
    if metric.percent:
        return f"{_number(value * 100)} %"
    return f"{_number(value)} {metric.unit}".rstrip()


def _change(value: float, metric: MetricSettings) -> str:
    """A difference: in percentage points for percentages."""
    if metric.percent:
        return f"{_number(value * 100)} percentage points"
    return _value(value, metric)


def _number(value: float) -> str:
    """A figure as a person writes it: 910, 12.5, 1.25, 0.042."""
    size = abs(value)
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        text = f"{value:.1f}"
    elif size >= 1:
        text = f"{value:.2f}"
    elif size == 0:
        return "0"
    else:
        text = f"{value:.2g}"
        return text if "e" not in text else f"{value:.6f}".rstrip("0")
    return text.rstrip("0").rstrip(".")


def written_p(p: float) -> str:
    """A p-value as the sentences write it: "< 0.001", "= 0.004", "= 0.27"."""
    return _p(p)


def written_ratio(value: float, allowed: float | None = None) -> str:
    """A ratio as the sentences write it ("2.2", "15", "1.19")."""
    return _ratio(value, allowed)


def written(value: float, metric: MetricSettings) -> str:
    """A figure in the metric's units, as the sentences write it (for a page beside them)."""
    return _value(value, metric)
