"""What a release's metrics are compared with (risk/history.py `MetricSeries.comparison`), and
the metric signal that reads it (risk/history_signals.py)."""

from __future__ import annotations

from risk.history import History, MetricSeries
from risk.history_signals import metric_signal
from risk.settings import PolicySettings


def flat(centre: float, n: int) -> tuple[float, ...]:
    return tuple(centre * (1 + ((i * 7) % 11 - 5) / 100) for i in range(n))


def series(baseline: int, recent: int) -> MetricSeries:
    return MetricSeries(
        "response_time_p95",
        release=flat(170, 29),
        baseline=flat(170, baseline),
        recent=(("9.1.1", flat(170, recent)),) if recent else (),
    )


def test_a_baseline_of_a_few_minutes_gives_way_to_the_recent_releases() -> None:
    # tenacity 9.1.2 was tagged 3 minutes after 9.1.1: its baseline window held 2 samples.
    values, said = series(baseline=2, recent=29).comparison(min_samples=20)
    assert said == "the previous release" and len(values) == 29
    # A full baseline window is kept; without a minimum, any baseline is.
    assert series(baseline=29, recent=29).comparison(20)[1] == "the baseline window"
    assert series(baseline=2, recent=29).comparison()[1] == "the baseline window"
    # Recent releases no better off: the short baseline stays, and is too little data.
    assert series(baseline=2, recent=5).comparison(20)[1] == "the baseline window"
    assert series(baseline=0, recent=0).comparison(20) == ((), "no baseline")


def test_a_flat_release_after_a_short_lived_one_is_not_sent_to_a_person() -> None:
    cfg = PolicySettings()
    short = History("tenacity", "9.1.2", metrics=(series(baseline=2, recent=29),))
    signal = metric_signal(short, cfg)
    assert signal is not None and signal.level == "none", signal and signal.detail
    # With no longer window anywhere, too little data goes to a person, as before.
    alone = History("tenacity", "9.1.2", metrics=(series(baseline=2, recent=0),))
    signal = metric_signal(alone, cfg)
    assert signal is not None and signal.level == cfg.too_little_metric_data_level
