"""Detective's configuration: environment variables, read and validated once at start-up.
Over 600 lines: every variable is read and checked here in one pass, so that a start-up names
every bad value at once; split by subsystem, each part would need the whole environment again.

Every setting comes from the environment (or a `.env` file in the project root). A bad value
stops start-up with a `ConfigError` that names the variable and says what is expected.
`settings.py` builds Django's settings from the validated `DetectiveConfig`."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import socket
import stat
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import dj_database_url
from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

BASE_DIR = Path(__file__).resolve().parent.parent

Provider = Literal[
    "anthropic",
    "openai",
    "openrouter",
    "ollama",
    # OpenAI-compatible servers (the agent's presets): local ones need a base URL and a model.
    "openai-compatible",
    "vllm",
    "llamacpp",
    "lmstudio",
    "local",
]
PROVIDERS: tuple[str, ...] = Provider.__args__
# Other spellings the agent accepts, mapped to the names above.
PROVIDER_ALIASES = {
    "claude": "anthropic",
    "openai_compatible": "openai-compatible",
    "openai-compat": "openai-compatible",
    "llama.cpp": "llamacpp",
    "llama-cpp": "llamacpp",
    "llama-server": "llamacpp",
    "lm-studio": "lmstudio",
}

SUPPORTED_ENGINES = frozenset({"django.db.backends.postgresql", "django.db.backends.sqlite3"})
SQLITE_FILE_NAME = "detective.sqlite3"
SQLITE_TEST_FILE_STEM = "test_detective"
CHANNELS_FILE_NAME = "channels.sqlite3"
# Longer than the 5 s channels_redis blocks waiting for a message; room for a thousand
# commands in flight per process (see channel_layers).
REDIS_SOCKET_TIMEOUT_S = 30.0
REDIS_MAX_CONNECTIONS = 1000
# Messages a channel may hold before the layer drops new ones (both layers default to 100).
# A web process reads every run it shows through one inbox (assessments/fanout.py); a few runs
# narrating at once, with the process busy, passed 100 and lost events.
CHANNEL_CAPACITY = 1000
SECRET_KEY_FILE_NAME = "secret_key"
MIN_SECRET_KEY_LENGTH = 50
LOCAL_HOSTS = ["localhost", "127.0.0.1", "[::1]"]

# What each variable expects, in words; shown when a value is rejected.
EXPECTED: dict[str, str] = {
    "DATABASE_URL": (
        "a database URL such as postgres://user:password@host:5432/name or "
        "sqlite:////absolute/path/detective.sqlite3 (unset: SQLite under DETECTIVE_DATA_DIR)"
    ),
    "REDIS_URL": "a Redis URL such as redis://127.0.0.1:6379/0 (unset: no broker)",
    "DETECTIVE_DATA_DIR": "a directory path for the SQLite database, traces and keys",
    "DETECTIVE_PROVIDER": f"one of {', '.join(PROVIDERS)}",
    "DETECTIVE_MODEL": "a model name, e.g. claude-sonnet-4-5",
    "DETECTIVE_BASE_URL": "an http:// or https:// URL of the provider's API",
    "ANTHROPIC_API_KEY": "an Anthropic API key",
    "OPENROUTER_API_KEY": "an OpenRouter API key",
    "OPENAI_API_KEY": "an OpenAI (or OpenAI-compatible server) API key",
    "SECRET_KEY": (
        f"a random string of at least {MIN_SECRET_KEY_LENGTH} characters, e.g. from "
        "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`"
    ),
    "DEBUG": "true or false (also 1/0, yes/no, on/off)",
    "DETECTIVE_SERVE_HOST": (
        "the address `manage.py up` serves on (it sets this itself from --host; with DEBUG "
        "unset, the site then runs with DEBUG off over plain HTTP)"
    ),
    "ALLOWED_HOSTS": "a comma-separated list of host names, e.g. detective.example.com",
    "DETECTIVE_ADMIN_PASSWORD": "a password of at least 8 characters for the `admin` user",
    "DETECTIVE_API_TOKEN": (
        "a random string of at least 32 characters that external callers of the release API "
        "send as `Authorization: Bearer <key>`"
    ),
    "DETECTIVE_API_URL": (
        "the http(s) base URL of the release API the agent's tools call "
        "(unset: this site's own address)"
    ),
    "DETECTIVE_RUN_DEADLINE": (
        "seconds an assessment may take in all before it is stopped and marked failed (10 or more)"
    ),
    "DETECTIVE_RUN_DATABASE_WAIT": (
        "seconds a running assessment waits for its database to answer again before it is "
        "marked failed (1 or more; keep it below DETECTIVE_RUN_STALE_SECONDS)"
    ),
    "DETECTIVE_TRACE_RETENTION_DAYS": (
        "days the per-minute figures of OTLP traces are kept (1 to 3650)"
    ),
    "DETECTIVE_OTLP_HOLD_HOURS": (
        "hours the spans of a version with no release yet are held for it before they are "
        "dropped (0: refused at once; up to 168)"
    ),
    "DETECTIVE_OTLP_MAX_IN_FLIGHT": (
        "OTLP requests one web process reads and stores at once; the next is answered 429 with "
        "Retry-After (1 to 256)"
    ),
    "DETECTIVE_RUN_STALE_SECONDS": (
        "seconds without a heartbeat after which a running assessment is marked failed (5 or more)"
    ),
    "DETECTIVE_WEBHOOK_ALLOWED_NETWORKS": (
        "a comma-separated list of networks or addresses (e.g. 10.20.0.0/16,127.0.0.1) that "
        "webhook endpoints may reach although they are not public (unset: none)"
    ),
    "DETECTIVE_WEBHOOK_TIMEOUT": (
        "seconds one webhook delivery attempt may take in all: connect, send and read (1 to 60)"
    ),
    "DETECTIVE_REVIEW_SCENARIOS": (
        "a directory path where review labels are exported as eval scenarios "
        "(unset: <DETECTIVE_DATA_DIR>/review-scenarios)"
    ),
}
SECRET_VARIABLES = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "OPENROUTER_API_KEY",
        "OPENAI_API_KEY",
        "SECRET_KEY",
        "DETECTIVE_ADMIN_PASSWORD",
        "DETECTIVE_API_TOKEN",
        # A database or Redis URL may carry a password.
        "DATABASE_URL",
        "REDIS_URL",
    }
)


class ConfigError(ValueError):
    """The environment does not describe a valid configuration. The message says how to fix it."""


def _env(name: str) -> Any:
    return Field(default=None, validation_alias=name, description=EXPECTED[name])


class DetectiveConfig(BaseSettings):
    """The validated environment. Build it with `load_config()`, not directly."""

    model_config = SettingsConfigDict(
        env_file=BASE_DIR / ".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=False,
    )

    database_url: str | None = _env("DATABASE_URL")
    redis_url: str | None = _env("REDIS_URL")
    data_dir: Path = Field(
        default=BASE_DIR / "data",
        validation_alias="DETECTIVE_DATA_DIR",
        description=EXPECTED["DETECTIVE_DATA_DIR"],
    )
    provider: Provider | None = _env("DETECTIVE_PROVIDER")
    model: str | None = _env("DETECTIVE_MODEL")
    base_url: str | None = _env("DETECTIVE_BASE_URL")
    anthropic_api_key: SecretStr | None = _env("ANTHROPIC_API_KEY")
    openrouter_api_key: SecretStr | None = _env("OPENROUTER_API_KEY")
    openai_api_key: SecretStr | None = _env("OPENAI_API_KEY")
    secret_key: SecretStr | None = _env("SECRET_KEY")
    # None (unset) is resolved in _resolve_debug: on, except under `up` (DETECTIVE_SERVE_HOST).
    debug: bool | None = Field(
        default=None, validation_alias="DEBUG", description=EXPECTED["DEBUG"]
    )
    serve_host: str | None = _env("DETECTIVE_SERVE_HOST")
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias="ALLOWED_HOSTS",
        description=EXPECTED["ALLOWED_HOSTS"],
    )
    admin_password: SecretStr | None = _env("DETECTIVE_ADMIN_PASSWORD")
    # The key external callers of the release API use. The agent's own runs get a token of
    # their own per run; this is for anything else (the agent's CLI sends DETECTIVE_API_TOKEN).
    api_key: SecretStr | None = _env("DETECTIVE_API_TOKEN")
    api_url: str | None = _env("DETECTIVE_API_URL")
    # How long the per-minute figures of OTLP traces are kept (`manage.py purge_traces`);
    # error groups and which releases they were seen in are kept with their releases.
    trace_retention_days: int = Field(
        default=90,
        ge=1,
        le=3650,
        validation_alias="DETECTIVE_TRACE_RETENTION_DAYS",
        description=EXPECTED["DETECTIVE_TRACE_RETENTION_DAYS"],
    )
    # Spans of a version whose release has not been sent yet are held this long for it.
    otlp_hold_hours: float = Field(
        default=24.0,
        ge=0,
        le=168,
        validation_alias="DETECTIVE_OTLP_HOLD_HOURS",
        description=EXPECTED["DETECTIVE_OTLP_HOLD_HOURS"],
    )
    # OTLP requests a web process works on at once; the next is shed (429, Retry-After), so a
    # fleet of exporters waits out a slow database instead of piling requests onto it.
    otlp_max_in_flight: int = Field(
        default=4,
        ge=1,
        le=256,
        validation_alias="DETECTIVE_OTLP_MAX_IN_FLIGHT",
        description=EXPECTED["DETECTIVE_OTLP_MAX_IN_FLIGHT"],
    )
    run_stale_seconds: float = Field(
        default=30.0,
        ge=5,
        validation_alias="DETECTIVE_RUN_STALE_SECONDS",
        description=EXPECTED["DETECTIVE_RUN_STALE_SECONDS"],
    )

    _local_site: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _resolve_debug(self) -> DetectiveConfig:
        """DEBUG unset means on for development commands, and off under `up`, which serves a
        local site: its own generated secret key, host names from --host, plain HTTP."""
        if self.debug is None:
            self._local_site = self.serve_host is not None
            self.debug = not self._local_site
        return self

    @property
    def local_site(self) -> bool:
        """`up` with DEBUG unset: DEBUG off, but neither a SECRET_KEY nor HTTPS required."""
        return self._local_site

    @property
    def behind_https_proxy(self) -> bool:
        """DEBUG=false set explicitly: a public site behind a proxy that terminates TLS."""
        return not self.debug and not self._local_site

    run_database_wait: float = Field(
        default=20.0,
        ge=1,
        validation_alias="DETECTIVE_RUN_DATABASE_WAIT",
        description=EXPECTED["DETECTIVE_RUN_DATABASE_WAIT"],
    )
    run_deadline: float = Field(
        default=900.0,
        ge=10,
        validation_alias="DETECTIVE_RUN_DEADLINE",
        description=EXPECTED["DETECTIVE_RUN_DEADLINE"],
    )
    review_scenarios_dir: Path | None = _env("DETECTIVE_REVIEW_SCENARIOS")
    webhook_allowed_networks: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias="DETECTIVE_WEBHOOK_ALLOWED_NETWORKS",
        description=EXPECTED["DETECTIVE_WEBHOOK_ALLOWED_NETWORKS"],
    )
    webhook_timeout: float = Field(
        default=10.0,
        ge=1,
        le=60,
        validation_alias="DETECTIVE_WEBHOOK_TIMEOUT",
        description=EXPECTED["DETECTIVE_WEBHOOK_TIMEOUT"],
    )

    @field_validator("webhook_allowed_networks", mode="before")
    @classmethod
    def _check_networks(cls, value: Any) -> Any:
        if value is None:
            return []
        items = value.split(",") if isinstance(value, str) else value
        networks = []
        for item in items:
            if item.strip():
                # A bad network is refused at start-up, not at the first delivery.
                networks.append(str(ipaddress.ip_network(item.strip(), strict=False)))
        return networks

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any, info: ValidationInfo) -> Any:
        """`FOO=` in the environment means the same as leaving FOO unset."""
        if not isinstance(value, str):
            return value
        if value.strip():
            return value.strip()
        field = cls.model_fields[info.field_name or ""]
        return field.get_default(call_default_factory=True)

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        if value is not None:
            scheme = value.split("://", 1)[0]
            try:
                engine = dj_database_url.parse(value)["ENGINE"]
            except ValueError:
                if "://" not in value:
                    raise ValueError("not a URL") from None
                raise ValueError(f"unsupported URL scheme {scheme!r}") from None
            if engine not in SUPPORTED_ENGINES:
                # Django knows more (MySQL, Oracle ...), but Detective runs on these two only.
                raise ValueError(f"unsupported URL scheme {scheme!r}") from None
        return value

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in {"redis", "rediss", "unix"}:
                raise ValueError("the scheme must be redis://, rediss:// or unix://")
            if parts.scheme != "unix" and not parts.hostname:
                raise ValueError("the URL has no host")
        return value

    @field_validator("provider", mode="before")
    @classmethod
    def _lowercase_provider(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().lower()
            return PROVIDER_ALIASES.get(value, value)
        return value

    @field_validator("api_key")
    @classmethod
    def _check_api_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 32:
            raise ValueError("too short")
        return value

    @field_validator("base_url", "api_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in {"http", "https"} or not parts.netloc:
                raise ValueError("not an http(s) URL")
        return value

    @field_validator("data_dir")
    @classmethod
    def _absolute_data_dir(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("review_scenarios_dir")
    @classmethod
    def _absolute_review_dir(cls, value: Path | None) -> Path | None:
        return value.expanduser().resolve() if value is not None else None

    def effective_review_scenarios_dir(self) -> Path:
        return self.review_scenarios_dir or self.data_dir / "review-scenarios"

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return [host.strip() for host in value.split(",") if host.strip()]
        return value

    @field_validator("admin_password")
    @classmethod
    def _check_admin_password(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 8:
            raise ValueError("too short")
        return value

    # ---- checks across variables -------------------------------------------------------------

    def production_problems(self) -> dict[str, str]:
        """With DEBUG off the site is public: it needs a real secret key and its host names."""
        if self.debug or self._local_site:
            return {}
        problems: dict[str, str] = {}
        key = self.secret_key.get_secret_value() if self.secret_key else ""
        if not key:
            problems["SECRET_KEY"] = "required when DEBUG is off"
        elif len(key) < MIN_SECRET_KEY_LENGTH or len(set(key)) < 5 or key.startswith("django-"):
            problems["SECRET_KEY"] = "too short or too predictable for production"
        if not self.allowed_hosts:
            problems["ALLOWED_HOSTS"] = "required when DEBUG is off"
        return problems

    # ---- what settings.py needs -------------------------------------------------------------

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / SQLITE_FILE_NAME

    def databases(self) -> dict[str, dict[str, Any]]:
        """DATABASES: DATABASE_URL if set, else SQLite in WAL mode under the data directory."""
        if self.database_url:
            default = dj_database_url.parse(self.database_url, conn_health_checks=True)
        else:
            default = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(self.sqlite_path)}
        if default["ENGINE"].endswith("postgresql"):
            # PostgreSQL's JIT compiles any statement the planner costs over 100,000: it added
            # 1.5 s to a 0.27 s statement of the home page, and a page's short statements never
            # repay it (docs/using/production.md, issue 39). Off for the site's connections
            # only; options the URL sets itself follow, so they win.
            options = default.setdefault("OPTIONS", {})
            options["options"] = " ".join(filter(None, ["-c jit=off", options.get("options")]))
        if default["ENGINE"] == "django.db.backends.sqlite3":
            # Tests use a file too: the task worker and the web server they start are other
            # processes, and threads share an in-memory database only with table locks. One
            # file per test process, so that two test runs never share one.
            test_name = f"{SQLITE_TEST_FILE_STEM}-{os.getpid()}.sqlite3"
            default["TEST"] = {"NAME": str(self.data_dir / test_name)}
            # WAL lets the web server read while the worker writes; IMMEDIATE transactions take
            # the write lock up front, so concurrent writers wait (busy timeout) instead of
            # failing with "database is locked" half-way through a transaction.
            default["OPTIONS"] = {
                "init_command": (
                    "PRAGMA journal_mode=WAL;"
                    "PRAGMA synchronous=NORMAL;"
                    "PRAGMA foreign_keys=ON;"
                    "PRAGMA busy_timeout=20000;"
                ),
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            }
        return {"default": default}

    def channel_layers(self) -> dict[str, dict[str, Any]]:
        """CHANNEL_LAYERS: Redis when REDIS_URL is set, else the broker-free default."""
        if self.redis_url:
            # redis-py 8's defaults kill websocket consumers (close 1011) under load: reads time
            # out after 5 s, just as a consumer's BZPOPMIN blocks for channels_redis's 5 s; and
            # a pool refuses a 101st command in flight (100 pages joining a run at once).
            host = {
                "address": self.redis_url,
                "socket_timeout": REDIS_SOCKET_TIMEOUT_S,
                "max_connections": REDIS_MAX_CONNECTIONS,
            }
            return {
                "default": {
                    "BACKEND": "channels_redis.core.RedisChannelLayer",
                    "CONFIG": {"hosts": [host], "capacity": CHANNEL_CAPACITY},
                }
            }
        # Broker-free: web server and task worker are separate processes on one machine, and
        # meet in a small SQLite file of their own (see assessments/channel_layer.py).
        return {
            "default": {
                "BACKEND": "assessments.channel_layer.SQLiteChannelLayer",
                "CONFIG": {
                    "path": str(self.data_dir / CHANNELS_FILE_NAME),
                    "capacity": CHANNEL_CAPACITY,
                },
            }
        }

    def effective_secret_key(self) -> str:
        """SECRET_KEY, or (DEBUG only) a random key generated once and kept in the data dir."""
        if self.secret_key:
            return self.secret_key.get_secret_value()
        return _read_or_create_secret(self.data_dir / SECRET_KEY_FILE_NAME)

    def effective_allowed_hosts(self) -> list[str]:
        if self.allowed_hosts:
            return self.allowed_hosts
        if self._local_site and self.serve_host is not None:
            return hosts_for_address(self.serve_host)
        return list(LOCAL_HOSTS) if self.debug else []


WILDCARD_ADDRESSES = {"0.0.0.0", "::", ""}


def hosts_for_address(address: str) -> list[str]:
    """The host names a site bound to `address` answers to: the loopback names, plus the
    address itself, or (all interfaces) this machine's name and addresses."""
    hosts = list(LOCAL_HOSTS)
    if address in WILDCARD_ADDRESSES:
        name = socket.gethostname()
        candidates = [name, socket.getfqdn()]
        with contextlib.suppress(OSError):
            candidates += socket.gethostbyname_ex(name)[2]
    else:
        candidates = [f"[{address}]" if ":" in address else address]
    for host in candidates:
        if host and host not in hosts:
            hosts.append(host)
    return hosts


UP_COMMAND = "up"


def prepare_up_environment(argv: Sequence[str], environ: MutableMapping[str, str]) -> None:
    """Before settings load, for `manage.py up`: tell every process of the site (they inherit
    the environment) the address it serves on, and turn DEBUG on only with --debug."""
    if len(argv) < 2 or argv[1] != UP_COMMAND:
        return
    host = "127.0.0.1"
    for index, arg in enumerate(argv):
        if arg == "--host" and index + 1 < len(argv):
            host = argv[index + 1]
        elif arg.startswith("--host="):
            host = arg.split("=", 1)[1]
    environ["DETECTIVE_SERVE_HOST"] = host
    if "--debug" in argv:
        environ["DEBUG"] = "true"


def secure_data_dir(path: Path, database_files: Sequence[Path] = ()) -> None:
    """The data dir 0700 and the SQLite files 0600 (they hold password hashes and sessions).


    SQLite gives its -wal and -shm files the mode of the database file, so creating that file
    0600 before SQLite does covers all three. Modes wider than these are narrowed. A directory
    that cannot be created or written is a ConfigError naming DETECTIVE_DATA_DIR.
    """
    try:
        ours = not path.exists() or any(
            (path / name).exists() for name in (SECRET_KEY_FILE_NAME, SQLITE_FILE_NAME)
        )
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        if ours:  # a directory someone else chose and filled keeps its mode
            _narrow(path, 0o700)
        for database in database_files:
            database.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            for file in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
                if file.exists():
                    _narrow(file, 0o600)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"Permission denied: {str(path)!r}")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(
            format_problems({"DETECTIVE_DATA_DIR": f"cannot create or write {path} ({reason})"})
        ) from None


def _narrow(path: Path, mode: int) -> None:
    current = stat.S_IMODE(path.stat().st_mode)
    if current & ~mode:
        # Not ours to change (a shared directory): leave it; the files in it still are ours.
        with contextlib.suppress(PermissionError):
            path.chmod(current & mode)


def _read_or_create_secret(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # A key file someone widened (0644) is narrowed at start, like the database files.
        with contextlib.suppress(OSError):
            _narrow(path, 0o600)
        return path.read_text(encoding="utf-8").strip()
    key = secrets.token_urlsafe(MIN_SECRET_KEY_LENGTH)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key)
    return key


def format_problems(problems: dict[str, str]) -> str:
    lines = ["Invalid configuration (set these environment variables, or put them in .env):"]
    for name, problem in problems.items():
        lines.append(f"  {name}: {problem}; expected {EXPECTED.get(name, 'a valid value')}.")
    return "\n".join(lines)


def _problems_from(exc: ValidationError) -> dict[str, str]:
    problems: dict[str, str] = {}
    for error in exc.errors(include_url=False):
        name = str(error["loc"][0]) if error["loc"] else "configuration"
        message = str(error["msg"]).removeprefix("Value error, ")
        if name not in SECRET_VARIABLES and "input" in error:
            message = f"got {error['input']!r} ({message})"
        problems.setdefault(name, message)
    return problems


def load_config(**overrides: Any) -> DetectiveConfig:
    """Read and validate the environment; raise ConfigError naming every bad variable."""
    try:
        config = DetectiveConfig(**overrides)
    except ValidationError as exc:
        raise ConfigError(format_problems(_problems_from(exc))) from None
    if problems := config.production_problems():
        raise ConfigError(format_problems(problems))
    return config
