"""Benchmark: the metric judge (`risk.judge`) on large windows.

How long one judgement takes, from the samples to the sentences, on:

- `1 metric, 2 x 10,000`: one latency metric, 10,000 samples in the baseline and 10,000 in
  the release (a week of minute samples is about 10,000);
- `3 metrics, 2 x 10,000`: error rate, p95 and median latency, 10,000 samples a side each
  (what a release with dense metrics gives the judge);
- `3 metrics, 2 x 60`: the same with an hour of minute samples, for scale.

The release's windows are shifted up (a regression), so the judge goes all the way to its
sentences. No target: the figure is printed for the risk policy and the metric-history
endpoint to know what a judgement costs (there is no timed test anywhere).
"""

from __future__ import annotations

import time

import numpy as np

from bench.harness import Context, Result, Stats, interleave
from risk.judge import judge

NAME = "judge"
CONTESTANT = "judge"


def windows(n: int, metrics: int, seed: int = 20) -> tuple[dict[str, list[float]], ...]:
    """A baseline and a (regressed) release window of `n` samples per metric."""
    rng = np.random.default_rng(seed)
    shapes = {
        "response_time_p95": (420.0, 60.0, 1.8),
        "error_rate": (0.001, 0.0003, 8.0),
        "response_time_p50": (180.0, 20.0, 1.2),
    }
    chosen = list(shapes.items())[:metrics]
    baseline = {name: rng.normal(m, s, n).clip(0).tolist() for name, (m, s, _) in chosen}
    current = {name: rng.normal(m * k, s, n).clip(0).tolist() for name, (m, s, k) in chosen}
    return baseline, current


async def run(ctx: Context) -> list[Result]:
    cases = (("1 metric", 10_000, 1), ("3 metrics", 10_000, 3), ("3 metrics", 60, 3))
    rounds, warmup = (5, 1) if ctx.quick else (30, 3)
    budget_s = 5.0 if ctx.quick else 30.0
    rows: list[Result] = []
    for label, n, metrics in cases:
        baseline, current = windows(n, metrics)
        outcome = judge(baseline, current).outcome

        async def once(
            baseline: dict[str, list[float]] = baseline, current: dict[str, list[float]] = current
        ) -> list[float]:
            begin = time.perf_counter()
            judge(baseline, current)
            return [(time.perf_counter() - begin) * 1000]

        case = f"{label}, 2 x {n:,}"
        ctx.say(f"{NAME}: {case} samples ({outcome}), up to {rounds} rounds")
        measured = await interleave(
            {CONTESTANT: once}, rounds=rounds, warmup=warmup, time_budget_s=budget_s
        )
        rows.append(
            Result(
                benchmark=NAME,
                case=case,
                contestant=CONTESTANT,
                unit="ms",
                stats=Stats.of(measured.samples[CONTESTANT]),
                note=f"judgement: {outcome}",
            )
        )
    return rows
