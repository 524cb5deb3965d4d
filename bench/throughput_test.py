from __future__ import annotations

import pytest

from bench.throughput import burst_limit


@pytest.mark.parametrize(
    ("burst", "workers", "limit"), [(20, 1, 24.0), (20, 2, 12.0), (20, 3, 8.4), (4, 2, 2.4)]
)
def test_a_burst_may_take_ceil_burst_over_workers_runs_plus_a_fifth(
    burst: int, workers: int, limit: float
) -> None:
    assert burst_limit(burst, workers, 1.0) == pytest.approx(limit)
