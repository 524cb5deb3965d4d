from __future__ import annotations

import os
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from detective_site.config import (
    BASE_DIR,
    EXPECTED,
    ConfigError,
    DetectiveConfig,
    load_config,
    prepare_up_environment,
    secure_data_dir,
)

VARIABLES = list(EXPECTED)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """An environment with none of Detective's variables set, and a temporary data dir."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DETECTIVE_DATA_DIR", str(tmp_path / "data"))
    return monkeypatch


def load() -> DetectiveConfig:
    return load_config(_env_file=None)


def error_for(env: pytest.MonkeyPatch, **variables: str) -> str:
    for name, value in variables.items():
        env.setenv(name, value)
    with pytest.raises(ConfigError) as error:
        load()
    return str(error.value)


# ---- bad values are named, with what is expected -------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("DEBUG", "maybe", "true or false"),
        ("DATABASE_URL", "nonsense", "database URL"),
        ("DATABASE_URL", "mongodb://localhost/db", "database URL"),
        ("REDIS_URL", "http://localhost:6379", "Redis URL"),
        ("DETECTIVE_PROVIDER", "skynet", "anthropic, openai, openrouter, ollama"),
        ("DETECTIVE_BASE_URL", "localhost:11434", "http:// or https://"),
        ("DETECTIVE_ADMIN_PASSWORD", "short", "at least 8 characters"),
    ],
)
def test_a_bad_variable_is_named_with_what_is_expected(
    env: pytest.MonkeyPatch, name: str, value: str, expected: str
) -> None:
    message = error_for(env, **{name: value})
    assert f"  {name}: " in message
    assert expected in message


def test_every_bad_variable_is_reported_at_once(env: pytest.MonkeyPatch) -> None:
    message = error_for(env, DEBUG="maybe", DETECTIVE_PROVIDER="skynet")
    assert "DEBUG" in message
    assert "DETECTIVE_PROVIDER" in message


def test_secrets_are_not_echoed_in_errors(env: pytest.MonkeyPatch) -> None:
    message = error_for(
        env, DETECTIVE_ADMIN_PASSWORD="hunter2", DATABASE_URL="nosuch://user:s3cret@host/db"
    )
    assert "hunter2" not in message
    assert "s3cret" not in message
    assert "DETECTIVE_ADMIN_PASSWORD" in message
    assert "DATABASE_URL" in message


def test_production_needs_a_real_secret_key_and_hosts(env: pytest.MonkeyPatch) -> None:
    message = error_for(env, DEBUG="false")
    assert "SECRET_KEY: required when DEBUG is off" in message
    assert "ALLOWED_HOSTS: required when DEBUG is off" in message
    message = error_for(env, SECRET_KEY="django-insecure-changeme", ALLOWED_HOSTS="a.example")
    assert "SECRET_KEY: too short or too predictable" in message


def test_unknown_variables_are_ignored_and_blank_means_unset(env: pytest.MonkeyPatch) -> None:
    env.setenv("DEBUG", "")
    env.setenv("DATABASE_URL", " ")
    env.setenv("DETECTIVE_PROVIDER", "")
    env.setenv("SOMETHING_ELSE", "whatever")
    config = load()
    assert config.debug is True
    assert config.database_url is None
    assert config.provider is None


# ---- good values -----------------------------------------------------------------------------


def test_defaults_are_sqlite_in_wal_mode_under_the_data_dir(env: pytest.MonkeyPatch) -> None:
    config = load()
    database = config.databases()["default"]
    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert database["NAME"] == str(config.data_dir / "detective.sqlite3")
    assert "journal_mode=WAL" in database["OPTIONS"]["init_command"]
    # Tests use a file too, which the worker and web processes they start can open.
    test_name = f"test_detective-{os.getpid()}.sqlite3"
    assert database["TEST"]["NAME"] == str(config.data_dir / test_name)
    layer = config.channel_layers()["default"]
    assert layer["BACKEND"] == "assessments.channel_layer.SQLiteChannelLayer"
    assert layer["CONFIG"]["path"] == str(config.data_dir / "channels.sqlite3")
    assert layer["CONFIG"]["capacity"] == 1000  # a busy web process's inbox: not 100
    assert config.effective_allowed_hosts() == ["localhost", "127.0.0.1", "[::1]"]


def test_local_providers_and_their_aliases_are_accepted(env: pytest.MonkeyPatch) -> None:
    env.setenv("DETECTIVE_PROVIDER", "OpenAI_Compatible")
    assert load().provider == "openai-compatible"
    env.setenv("DETECTIVE_PROVIDER", "llama.cpp")
    assert load().provider == "llamacpp"


def test_the_api_key_is_secret_and_long(env: pytest.MonkeyPatch) -> None:
    env.setenv("DETECTIVE_API_TOKEN", "short")
    message = error_for(env)
    assert "DETECTIVE_API_TOKEN: too short" in message
    assert "short'" not in message  # the value is not echoed
    env.setenv("DETECTIVE_API_TOKEN", "k" * 40)
    assert load().api_key.get_secret_value() == "k" * 40  # type: ignore[union-attr]


def test_data_dir_defaults_to_data_in_the_project(env: pytest.MonkeyPatch) -> None:
    env.delenv("DETECTIVE_DATA_DIR")
    assert load().data_dir == BASE_DIR / "data"


def test_database_and_redis_urls(env: pytest.MonkeyPatch) -> None:
    env.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/detective")
    env.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    config = load()
    database = config.databases()["default"]
    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert database["NAME"] == "detective"
    assert "OPTIONS" not in database or "init_command" not in database["OPTIONS"]
    # Issue 39: PostgreSQL's JIT off for the site's connections.
    assert database["OPTIONS"]["options"] == "-c jit=off"
    layer = config.channel_layers()["default"]
    assert layer["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    # Reads wait longer than the 5 s a consumer's BZPOPMIN blocks; many pages may join at once.
    assert layer["CONFIG"]["hosts"] == [
        {"address": "redis://127.0.0.1:6379/0", "socket_timeout": 30.0, "max_connections": 1000}
    ]
    assert layer["CONFIG"]["capacity"] == 1000


def test_provider_settings_and_keys_are_secret(env: pytest.MonkeyPatch) -> None:
    env.setenv("DETECTIVE_PROVIDER", "OpenRouter")
    env.setenv("DETECTIVE_MODEL", "qwen/qwen3-8b")
    env.setenv("DETECTIVE_BASE_URL", "https://openrouter.ai/api/v1")
    env.setenv("OPENROUTER_API_KEY", "sk-or-secret")
    config = load()
    assert config.provider == "openrouter"
    assert config.model == "qwen/qwen3-8b"
    assert config.openrouter_api_key is not None
    assert config.openrouter_api_key.get_secret_value() == "sk-or-secret"
    assert "sk-or-secret" not in repr(config)


def test_allowed_hosts_are_comma_separated(env: pytest.MonkeyPatch) -> None:
    env.setenv("ALLOWED_HOSTS", "detective.example.com, .internal.example ,")
    assert load().allowed_hosts == ["detective.example.com", ".internal.example"]


def test_production_settings_are_accepted(env: pytest.MonkeyPatch) -> None:
    env.setenv("DEBUG", "off")
    env.setenv("SECRET_KEY", "x" * 10 + "a-much-longer-random-secret-key-for-production-0123456789")
    env.setenv("ALLOWED_HOSTS", "detective.example.com")
    config = load()
    assert config.debug is False
    assert config.effective_allowed_hosts() == ["detective.example.com"]


def test_without_a_secret_key_development_keeps_a_generated_one(env: pytest.MonkeyPatch) -> None:
    config = load()
    key = config.effective_secret_key()
    assert len(key) >= 50
    assert load().effective_secret_key() == key
    key_file = config.data_dir / "secret_key"
    assert key_file.stat().st_mode & 0o777 == 0o600


def test_a_widened_secret_key_file_is_narrowed_at_start(env: pytest.MonkeyPatch) -> None:
    key = load().effective_secret_key()
    key_file = load().data_dir / "secret_key"
    key_file.chmod(0o644)
    assert load().effective_secret_key() == key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


# ---- at start-up -----------------------------------------------------------------------------


def manage(*args: str, tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    # Empty values override a developer's .env file, and mean "unset".
    environ = {**os.environ, **dict.fromkeys(EXPECTED, "")}
    environ.update({"DETECTIVE_DATA_DIR": str(tmp_path / "data"), **variables})
    return subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_manage_py_stops_with_a_clear_message_on_a_bad_variable(tmp_path: Path) -> None:
    result = manage("check", tmp_path=tmp_path, DEBUG="maybe")
    assert result.returncode != 0
    assert "DEBUG: got 'maybe'" in result.stderr
    assert "expected true or false" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_deploy_is_clean_with_production_settings(tmp_path: Path) -> None:
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        tmp_path=tmp_path,
        DEBUG="false",
        SECRET_KEY="q8Jf2-production-secret-key-with-plenty-of-entropy-4hT9zLw0pX7",
        ALLOWED_HOSTS="detective.example.com",
    )
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


# ---- `up`: safe by default -------------------------------------------------------------------


def test_up_tells_its_processes_the_address_and_leaves_debug_alone() -> None:
    environ: dict[str, str] = {}
    prepare_up_environment(["manage.py", "up", "--port", "8001", "--host", "0.0.0.0"], environ)
    assert environ == {"DETECTIVE_SERVE_HOST": "0.0.0.0"}
    environ = {}
    prepare_up_environment(["manage.py", "up", "--host=::1", "--debug"], environ)
    assert environ == {"DETECTIVE_SERVE_HOST": "::1", "DEBUG": "true"}
    environ = {}
    prepare_up_environment(["manage.py", "up"], environ)
    assert environ == {"DETECTIVE_SERVE_HOST": "127.0.0.1"}
    environ = {}
    prepare_up_environment(["manage.py", "runserver", "--debug"], environ)
    assert environ == {}


def test_under_up_debug_is_off_with_a_generated_key_and_local_hosts(
    env: pytest.MonkeyPatch,
) -> None:
    env.setenv("DETECTIVE_SERVE_HOST", "127.0.0.1")
    config = load()
    assert config.debug is False
    assert config.local_site and not config.behind_https_proxy
    assert config.effective_allowed_hosts() == ["localhost", "127.0.0.1", "[::1]"]
    assert len(config.effective_secret_key()) >= 50


def test_under_up_another_address_is_allowed_too(env: pytest.MonkeyPatch) -> None:
    env.setenv("DETECTIVE_SERVE_HOST", "10.1.2.3")
    assert load().effective_allowed_hosts() == ["localhost", "127.0.0.1", "[::1]", "10.1.2.3"]
    env.setenv("DETECTIVE_SERVE_HOST", "0.0.0.0")
    hosts = load().effective_allowed_hosts()
    assert hosts[:3] == ["localhost", "127.0.0.1", "[::1]"]
    assert socket.gethostname() in hosts


def test_under_up_debug_true_and_debug_false_mean_what_they_say(env: pytest.MonkeyPatch) -> None:
    env.setenv("DETECTIVE_SERVE_HOST", "127.0.0.1")
    env.setenv("DEBUG", "true")
    assert load().debug is True
    env.setenv("DEBUG", "false")
    message = error_for(env)
    assert "SECRET_KEY: required when DEBUG is off" in message


def test_without_up_debug_stays_on_by_default(env: pytest.MonkeyPatch) -> None:
    config = load()
    assert config.debug is True and not config.local_site


def test_the_data_dir_is_0700_and_the_databases_0600(tmp_path: Path) -> None:
    data = tmp_path / "data"
    database = data / "detective.sqlite3"
    secure_data_dir(data, [database])
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE t (x)")
    connection.execute("INSERT INTO t VALUES (1)")
    connection.commit()
    for suffix in ("-wal", "-shm"):
        assert stat.S_IMODE(Path(f"{database}{suffix}").stat().st_mode) == 0o600
    connection.close()


def test_an_existing_data_dir_and_database_are_narrowed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    database = data / "detective.sqlite3"
    database.write_bytes(b"")
    database.chmod(0o644)
    secure_data_dir(data, [database])
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE(database.stat().st_mode) == 0o600


def test_a_directory_chosen_by_someone_else_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    (shared / "other-file").write_text("x")
    secure_data_dir(shared, [])
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_data_dir_is_one_clear_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ConfigError) as error:
            secure_data_dir(locked / "data", [])
    finally:
        locked.chmod(0o700)
    assert "DETECTIVE_DATA_DIR: cannot create or write" in str(error.value)
    assert "Permission denied" in str(error.value)


def test_manage_py_says_so_in_one_message_when_the_data_dir_is_unwritable(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = manage("check", tmp_path=tmp_path, DETECTIVE_DATA_DIR=str(blocker / "data"))
    assert result.returncode != 0
    assert "DETECTIVE_DATA_DIR: cannot create or write" in result.stderr
    assert "Traceback" not in result.stderr


def test_review_scenarios_go_under_the_data_dir_unless_set(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert load().effective_review_scenarios_dir() == (tmp_path / "data").resolve() / (
        "review-scenarios"
    )
    env.setenv("DETECTIVE_REVIEW_SCENARIOS", "")  # empty means unset
    assert load().effective_review_scenarios_dir().name == "review-scenarios"
    env.setenv("DETECTIVE_REVIEW_SCENARIOS", str(tmp_path / "labels"))
    assert load().effective_review_scenarios_dir() == tmp_path / "labels"


def test_options_in_the_database_url_come_after_jit_off(env: pytest.MonkeyPatch) -> None:
    env.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/detective?options=-c%20jit%3Don")
    database = load().databases()["default"]
    assert database["OPTIONS"]["options"] == "-c jit=off -c jit=on"
