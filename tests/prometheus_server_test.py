"""Without Debian's prometheus package the Prometheus tests skip with the reason, except under
CI, where they fail: CI must run them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import prometheus_server


def test_missing_prometheus_skips_with_one_line_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prometheus_server, "PROMETHEUS", "/nonexistent/prometheus")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^/nonexistent/prometheus not installed"):
        prometheus_server.require_prometheus()


def test_missing_prometheus_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prometheus_server, "PROMTOOL", "/nonexistent/promtool")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"promtool not installed.*CI must run"):
        prometheus_server.require_prometheus()


def test_promtool_refusing_the_series_says_why(tmp_path: Path) -> None:
    prometheus_server.require_prometheus()
    with pytest.raises(RuntimeError, match="promtool refused the series"):
        prometheus_server.build_blocks("not openmetrics {{{\n", tmp_path / "tsdb")
