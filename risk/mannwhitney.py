"""The one-sided Mann-Whitney U test on numpy and the standard library, as scipy.stats
computes it (`mannwhitneyu(x, y, alternative=..., method="auto")`, scipy 1.17): the exact
distribution of U when a sample has at most 8 values and there are no ties, the normal
approximation with the tie and continuity corrections otherwise.

Why not scipy itself: importing scipy.stats took 3.6-4.1 s on the 2 shared cores under load
(`python -X importtime`, numpy already loaded; about 1 s idle), and scipy.stats._mannwhitneyu
imports the whole of scipy.stats; numpy alone took 0.24-0.48 s. The release summary judges
metrics inside a request a tool waits for with a timeout, so its first call must not pay for
scipy (docs/decisions/2026-11-27-mann-whitney-without-scipy.md). judge_test.py checks every
case against scipy's own figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

import numpy as np

Alternative = Literal["greater", "less"]

# scipy's `_mwu_choose_method`: exact when a sample is this small and nothing is tied.
EXACT_UP_TO = 8


def mannwhitneyu(x: Sequence[float], y: Sequence[float], alternative: Alternative) -> float:
    """The p-value of "x tends to be greater (less) than y"; NaN for an empty sample."""
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    n1, n2 = len(xs), len(ys)
    if not n1 or not n2:
        return math.nan
    ranks, ties = _average_ranks(np.concatenate([xs, ys]))
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    u = u1 if alternative == "greater" else n1 * n2 - u1
    if (n1 <= EXACT_UP_TO or n2 <= EXACT_UP_TO) and not bool((ties > 1).any()):
        p = _exact_sf(n1, n2, round(u))
    else:
        p = _normal_sf(u, n1, n2, ties)
    return min(max(p, 0.0), 1.0)


def _average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's rank (ties get their average rank, from 1), and the size of each group of
    equal values."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    group = np.cumsum(starts) - 1
    bounds = np.concatenate([np.flatnonzero(starts), [len(values)]])
    average = (bounds[:-1] + bounds[1:] + 1) / 2
    ranks = np.empty(len(values))
    ranks[order] = average[group]
    return ranks, np.diff(bounds)


def _normal_sf(u: float, n1: int, n2: int, ties: np.ndarray) -> float:
    n = n1 + n2
    tie_term = float((ties.astype(float) ** 3 - ties).sum())
    spread = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    numerator = u - n1 * n2 / 2 - 0.5
    if spread == 0:
        # Every value equal: scipy's z is -inf or NaN there, a p-value of 1 or NaN.
        return 1.0 if numerator <= 0 else math.nan
    return 0.5 * math.erfc(numerator / spread / math.sqrt(2))


def _exact_sf(n1: int, n2: int, u: int) -> float:
    """P(U >= u) under the null hypothesis, from U's exact distribution."""
    counts = _u_counts(min(n1, n2), max(n1, n2))
    if u <= 0:
        return 1.0
    if u >= len(counts):
        return 0.0
    return sum(counts[u:]) / sum(counts)


@lru_cache(maxsize=64)
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """How many arrangements give each value of U (0..m*n): the coefficients of the Gaussian
    binomial [m+n choose m] = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i)."""
    size = m * n + 1
    coefficients = [0] * size
    coefficients[0] = 1
    for i in range(1, m + 1):
        # Multiply by (1 - q^(n+i)), then divide by (1 - q^i): both exact on integers.
        step = n + i
        for k in range(size - 1, step - 1, -1):
            coefficients[k] -= coefficients[k - step]
        for k in range(i, size):
            coefficients[k] += coefficients[k - i]
    return tuple(coefficients)
