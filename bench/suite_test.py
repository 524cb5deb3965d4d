from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command


def test_the_command_runs_a_selection_and_writes_json_and_markdown(tmp_path: Path) -> None:
    out = StringIO()
    call_command(
        "bench",
        "--quick",
        "--only",
        "context",
        "--json",
        str(tmp_path / "bench.json"),
        "--markdown",
        str(tmp_path / "bench.md"),
        stdout=out,
    )
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["quick"] is True and data["failures"] == {}
    assert {row["benchmark"] for row in data["results"]} == {"context"}
    first_fit = next(
        row
        for row in data["results"]
        if row["case"] == "10,000 msgs, first fit" and row["contestant"] == "window manager"
    )
    assert first_fit["target"] == "<= 5 ms" and first_fit["met"] is not None
    assert (tmp_path / "bench.md").read_text().startswith("| benchmark | case |")
    assert "10,000 msgs, first fit" in out.getvalue()


def test_an_unknown_benchmark_is_a_usage_error() -> None:
    with pytest.raises(CommandError, match="unknown benchmark"):
        call_command("bench", "--only", "nonsense", stdout=StringIO())
