from __future__ import annotations

import pytest

from evals.scenario import Suite, load_suite


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite()
