"""A real Prometheus for the tests: series written as OpenMetrics text, turned into TSDB blocks
by `promtool tsdb create-blocks-from openmetrics`, served by `prometheus` on a free loopback port.

Debian's `prometheus` package provides both (`.ci/run` installs it when missing). Without them
the tests skip, unless `CI` is set: there a missing Prometheus is a failure, not a skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
READY_WITHIN = 30.0


def require_prometheus() -> None:
    """Skip (or, under CI, fail) when Debian's prometheus package is not installed."""
    missing = [path for path in (PROMETHEUS, PROMTOOL) if not os.access(path, os.X_OK)]
    if not missing:
        return
    reason = f"{' and '.join(missing)} not installed (Debian package prometheus)"
    if os.environ.get("CI", "").lower() not in {"", "0", "false", "no"}:
        pytest.fail(f"{reason}: CI must run the Prometheus tests (.ci/run installs it)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build_blocks(openmetrics: str, directory: Path) -> None:
    """TSDB blocks in `directory` from OpenMetrics text (which must end with `# EOF`)."""
    directory.mkdir(parents=True, exist_ok=True)
    source = directory.parent / "series.om"
    source.write_text(openmetrics, encoding="utf-8")
    built = subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if built.returncode != 0:
        raise RuntimeError(f"promtool refused the series: {built.stderr or built.stdout}")


@contextmanager
def prometheus_server(openmetrics: str, workdir: Path) -> Iterator[str]:
    """A Prometheus serving the series, as its base URL; stopped on exit."""
    storage = workdir / "tsdb"
    build_blocks(openmetrics, storage)
    config = workdir / "prometheus.yml"
    # No scrape jobs: the server only answers queries over the blocks.
    config.write_text("global:\n  scrape_interval: 1h\n", encoding="utf-8")
    port = free_port()
    log = (workdir / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={storage}",
            # Retention counts back from the newest block; the series are days old, keep them.
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, workdir / "prometheus.log")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        shutil.rmtree(storage, ignore_errors=True)


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_WITHIN
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"prometheus exited ({process.returncode}): {log.read_text()}")
        try:
            if httpx.get(f"{url}/-/ready", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"prometheus not ready within {READY_WITHIN:g} s: {log.read_text()}")


@contextmanager
def silent_server() -> Iterator[str]:
    """A loopback socket that accepts connections and never answers, as its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
