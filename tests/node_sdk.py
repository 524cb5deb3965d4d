"""Node's real OpenTelemetry SDK for the tests: where `.ci/run` installs it (`npm ci` in
tests/node_otlp, its package-lock.json pinning every version) and what a test does without it.

Without node or the installed packages the tests skip with the reason, so `uv run pytest`
passes on a fresh clone; with CI set they fail instead, since CI installs them (the pattern of
tests/browser/chromium.py's `without_chromium`)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from tests.browser.chromium import ci_is_set

FOLDER = Path(__file__).resolve().parent / "node_otlp"
SCRIPT = FOLDER / "export_spans.cjs"
# The packages the script requires; one missing means `npm ci` was not run.
PACKAGES = ("@opentelemetry/exporter-trace-otlp-proto", "@opentelemetry/sdk-trace-base")


def without_node_sdk(
    folder: Path, environ: Mapping[str, str]
) -> tuple[Literal["run", "skip", "fail"], str]:
    """What a Node SDK test does on this machine: run, or skip or fail with the reason."""
    reason = ""
    if shutil.which("node") is None:
        reason = "node is not installed (Debian: apt-get install nodejs npm)"
    elif missing := [p for p in PACKAGES if not (folder / "node_modules" / p).is_dir()]:
        reason = f"{', '.join(missing)} not installed (npm ci --prefix {folder})"
    if not reason:
        return "run", ""
    if ci_is_set(environ):
        return "fail", f"{reason}; CI is set, and CI must run the Node SDK test"
    return "skip", f"{reason}: the Node SDK test skipped"
