from __future__ import annotations

from pathlib import Path
from typing import Any

from assessments.runner.traces import traces_dir


def test_the_traces_live_in_the_data_dir(settings: Any, tmp_path: Path) -> None:
    settings.DATA_DIR = tmp_path
    assert traces_dir() == tmp_path / "traces"
