from __future__ import annotations

from pathlib import Path

import pytest

from bench.site import CONTROLLED, environment, secure_headers


def test_the_environment_is_production_and_nothing_leaks_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://elsewhere/db")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-key")
    env = environment(tmp_path, redis_url="redis://127.0.0.1:6379/13", EXTRA="1")
    assert env["DATABASE_URL"] == "" and env["OPENAI_API_KEY"] == ""
    assert env["DEBUG"] == "false"
    assert len(env["SECRET_KEY"]) >= 50
    assert env["DETECTIVE_DATA_DIR"] == str(tmp_path)
    assert env["REDIS_URL"].startswith("redis://127.0.0.1")
    assert env["EXTRA"] == "1"
    assert set(CONTROLLED) <= set(env)


def test_requests_look_like_they_came_through_the_tls_proxy() -> None:
    headers = secure_headers("http://127.0.0.1:8123/releases/")
    assert headers == {
        "X-Forwarded-Proto": "https",
        "Origin": "https://127.0.0.1:8123",
        "Referer": "https://127.0.0.1:8123/",
    }
