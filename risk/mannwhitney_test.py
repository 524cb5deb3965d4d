"""The Mann-Whitney U test without scipy, against scipy.stats.mannwhitneyu itself."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats

from risk.mannwhitney import mannwhitneyu

rng = random.Random(20261127)


def _cases() -> list[tuple[list[float], list[float]]]:
    cases = [
        ([19, 22, 16, 29, 24], [20, 11, 17, 12]),  # scipy's own example (exact)
        ([1.0, 2, 3], [4.0, 5, 6, 7, 8, 9, 10, 11, 12]),  # exact, all below
        ([400.0, 410, 420, 430, 440, 450], [300.0, 310, 320, 330, 340, 350]),
        ([1.0, 1, 2, 2, 3], [1.0, 2, 2, 3, 3, 4]),  # small with ties: asymptotic
        ([5.0] * 10, [5.0] * 12),  # nothing varies
        ([0.0] * 50 + [1.0] * 3, [0.0] * 55 + [1.0] * 1),  # error counts, mostly tied
    ]
    for n1, n2 in ((8, 200), (3, 9), (30, 30), (60, 60), (2000, 1500)):
        shift = rng.choice((0.0, 0.3, 1.0))
        cases.append(
            (
                [rng.lognormvariate(shift, 1) for _ in range(n1)],
                [rng.lognormvariate(0, 1) for _ in range(n2)],
            )
        )
    cases.append(
        (
            [float(rng.randint(0, 5)) for _ in range(40)],
            [float(rng.randint(0, 4)) for _ in range(45)],
        )
    )
    return cases


@pytest.mark.parametrize("alternative", ["greater", "less"])
@pytest.mark.parametrize(("x", "y"), _cases())
def test_the_p_value_is_scipys(x: list[float], y: list[float], alternative: str) -> None:
    expected = float(stats.mannwhitneyu(x, y, alternative=alternative).pvalue)
    got = mannwhitneyu(x, y, alternative)  # type: ignore[arg-type]
    if expected != expected:  # NaN
        assert got != got
    else:
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_a_clear_shift_is_significant_and_none_is_not() -> None:
    assert mannwhitneyu([10.0, 11, 12, 13, 14, 15], [1.0, 2, 3, 4, 5, 6], "greater") < 0.01
    assert mannwhitneyu([10.0, 11, 12, 13, 14, 15], [1.0, 2, 3, 4, 5, 6], "less") > 0.99


def test_judging_a_metric_never_imports_scipy() -> None:
    # The judgement runs inside the summary request; scipy.stats took 3.6-4.1 s to import
    # under load, so the request path must not load it.
    code = (
        "import sys\n"
        "from risk.judge import judge\n"
        "before, after = [100.0 + i for i in range(60)], [300.0 + i for i in range(60)]\n"
        "j = judge({'p95': before}, {'p95': after})\n"
        "print(j.outcome, 'scipy' in sys.modules, 'numpy' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fail", "False", "True"]
