"""Record what `evals.stats`'s distributions and tests give on a fixed table of inputs.

Run once on the hand-written implementation (commit fa5ef9a, before the move to scipy.stats):

    PYTHONPATH=. uv run python evals/testdata/stats/record_figures.py \
        > evals/testdata/stats/figures_before_scipy.json

`evals/stats_test.py` then asserts that the scipy-based functions reproduce every figure in
that file. Running it again on the current code shows the figures as they are now.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from evals.stats import (
    MeanStat,
    betainc,
    fisher_exact,
    pass_drop_p_value,
    t_ppf,
    t_sf,
    welch_p_value,
    wilson_interval,
)

BETAINC = [
    (a, b, x)
    for a, b in [(0.5, 0.5), (1, 1), (2, 3), (2.5, 1.5), (1.5, 2.5), (5, 0.5), (10, 20), (50, 0.5)]
    for x in (0.0, 0.01, 0.3, 0.5, 0.7, 0.99, 1.0)
]
T_SF = [
    (t, df)
    for df in (1, 2, 3, 5, 7.5, 10, 30, 120, 10_000)
    for t in (-4.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.5, 10.0)
]
T_PPF = [
    (p, df)
    for df in (1, 2, 5, 10, 30, 100_000)
    for p in (0.001, 0.025, 0.05, 0.3, 0.5, 0.8, 0.95, 0.975, 0.999)
]
WILSON = [(s, n) for n in (1, 2, 3, 5, 10, 30, 87, 500) for s in sorted({0, 1, n // 2, n - 1, n})]
FISHER = [
    (8, 2, 1, 5),
    (3, 0, 0, 3),
    (0, 3, 3, 0),
    (0, 0, 0, 0),
    (10, 10, 10, 10),
    (3, 0, 2, 1),
    (2, 1, 3, 0),
    (5, 0, 1, 4),
    (60, 6, 30, 36),
    (1, 9, 11, 3),
    (0, 5, 0, 5),
    (4, 0, 0, 0),
    (12, 5, 7, 9),
    (85, 2, 80, 7),
]
SAMPLES: dict[str, list[float]] = {
    "one": [0.4],
    "pair": [1000.0, 3000.0],
    "scores": [1.0, 0.5, 0.75, 0.25, 1.0],
    "flat_hi": [1.0, 1.0, 1.0],
    "flat_lo": [0.75, 0.75, 0.75],
    "x": [2.0, 3.0, 4.0, 5.0, 6.0],
    "y": [1.0, 2.0, 3.0, 4.0, 5.0],
    "latency": [812.0, 1030.5, 944.0, 1210.0, 870.25, 990.0, 1105.0],
    "mixed": [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.5, 1.0],
    "wide": [0.1, 0.9, 0.2, 0.95, 0.3],
}
WELCH = [
    ("x", "y"),
    ("y", "x"),
    ("flat_hi", "flat_lo"),
    ("flat_lo", "flat_hi"),
    ("scores", "mixed"),
    ("mixed", "wide"),
    ("latency", "pair"),
    ("flat_hi", "scores"),
    ("one", "scores"),
]


def _interval(ci: Any) -> list[float] | None:
    return None if ci is None else [ci.low, ci.high]


def record() -> dict[str, Any]:
    means = {}
    for name, values in SAMPLES.items():
        for bounded in (True, False):
            stat = MeanStat.of(values, bounded=bounded)
            assert stat is not None
            means[f"{name}/{'bounded' if bounded else 'unbounded'}"] = {
                "values": values,
                "bounded": bounded,
                "mean": stat.mean,
                "sd": stat.sd,
                "ci": _interval(stat.ci),
            }
    welch = []
    for base, current in WELCH:
        b = MeanStat.of(SAMPLES[base], bounded=False)
        c = MeanStat.of(SAMPLES[current], bounded=False)
        assert b is not None and c is not None
        welch.append({"baseline": base, "current": current, "p": welch_p_value(b, c)})
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "recorded_from": f"evals/stats.py at {commit}",
        "betainc": [{"a": a, "b": b, "x": x, "value": betainc(a, b, x)} for a, b, x in BETAINC],
        "t_sf": [{"t": t, "df": df, "value": t_sf(t, df)} for t, df in T_SF],
        "t_ppf": [{"p": p, "df": df, "value": t_ppf(p, df)} for p, df in T_PPF],
        "wilson": [
            {"successes": s, "n": n, "interval": _interval(wilson_interval(s, n))}
            for s, n in WILSON
        ]
        + [{"successes": 0, "n": 0, "interval": _interval(wilson_interval(0, 0))}],
        "fisher": [
            {
                "table": [a, b, c, d],
                "two-sided": fisher_exact(a, b, c, d),
                "greater": fisher_exact(a, b, c, d, "greater"),
                "less": fisher_exact(a, b, c, d, "less"),
                "pass_drop": pass_drop_p_value(a, a + b, c, c + d),
            }
            for a, b, c, d in FISHER
        ],
        "means": means,
        "welch": welch,
    }


if __name__ == "__main__":
    json.dump(record(), sys.stdout, indent=1)
    sys.stdout.write("\n")
