from __future__ import annotations

from pathlib import Path

import pytest

from local_model.paths import LocalModelPaths


@pytest.fixture
def paths(tmp_path: Path) -> LocalModelPaths:
    return LocalModelPaths.for_data_dir(tmp_path / "data")
