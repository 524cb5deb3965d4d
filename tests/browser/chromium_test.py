"""Whether the browser tests run, skip or fail, decided without a browser."""

from __future__ import annotations

from pathlib import Path

from tests.browser.chromium import without_chromium


def test_an_installed_chromium_runs_the_tests(tmp_path: Path) -> None:
    executable = tmp_path / "chromium"
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    assert without_chromium(str(executable), {"CI": "true"}) == ("run", "")


def test_without_chromium_the_tests_skip_with_the_reason(tmp_path: Path) -> None:
    verdict, reason = without_chromium(str(tmp_path / "chromium"), {})
    assert verdict == "skip"
    assert f"Chromium is not installed at {tmp_path / 'chromium'}" in reason
    assert "\n" not in reason


def test_without_chromium_on_ci_the_tests_fail_saying_why(tmp_path: Path) -> None:
    for value in ("true", "1", "TRUE"):
        verdict, reason = without_chromium(str(tmp_path / "chromium"), {"CI": value})
        assert verdict == "fail"
        assert "CI is set" in reason
    assert without_chromium(str(tmp_path / "chromium"), {"CI": "false"})[0] == "skip"
