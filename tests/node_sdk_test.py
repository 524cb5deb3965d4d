from __future__ import annotations

from pathlib import Path

from tests.node_sdk import FOLDER, without_node_sdk


def _installed(folder: Path) -> None:
    for package in ("exporter-trace-otlp-proto", "sdk-trace-base"):
        (folder / "node_modules" / "@opentelemetry" / package).mkdir(parents=True)


def test_with_the_packages_installed_the_test_runs(tmp_path: Path) -> None:
    _installed(tmp_path)
    assert without_node_sdk(tmp_path, {"CI": "true"}) == ("run", "")


def test_without_the_packages_it_skips_saying_how_to_install_them(tmp_path: Path) -> None:
    verdict, reason = without_node_sdk(tmp_path, {})
    assert verdict == "skip"
    assert "@opentelemetry/exporter-trace-otlp-proto" in reason and "npm ci" in reason


def test_without_the_packages_under_ci_it_fails(tmp_path: Path) -> None:
    verdict, reason = without_node_sdk(tmp_path, {"CI": "1"})
    assert verdict == "fail" and "CI must run" in reason


def test_the_lock_pins_the_packages_the_script_requires() -> None:
    lock = (FOLDER / "package-lock.json").read_text()
    script = (FOLDER / "export_spans.cjs").read_text()
    for package in ("sdk-trace-base", "exporter-trace-otlp-proto", "resources", "api"):
        assert f'"node_modules/@opentelemetry/{package}"' in lock
        assert f'require("@opentelemetry/{package}")' in script
