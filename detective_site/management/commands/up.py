"""`manage.py up`: everything needed to use Detective, in one command.

Migrates the database, seeds demo data when there are no releases, makes sure the superuser
`admin` exists, then runs the ASGI web server (daphne) and the background task worker
(django-tasks-db's `db_worker`) together until Ctrl+C (SIGINT) or SIGTERM stops both.
With no hosted provider configured and the local model installed (or DETECTIVE_PROVIDER=local),
it first starts llama-server on a loopback port, waits until it is healthy, and points the
worker at it; it stops with the rest.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections, connections

from assessments import services
from detective_site.config import BASE_DIR
from detective_site.supervisor import ChildNotReady, ChildSpec, Supervisor
from local_model import serve
from local_model.paths import LocalModelPaths
from local_model.spec import DEFAULT_CONTEXT, HEALTH_TIMEOUT, MODEL
from releases.models import Release

ADMIN_USERNAME = "admin"


def check_admin_password(password: str) -> None:
    """Django's password validators (AUTH_PASSWORD_VALIDATORS) on DETECTIVE_ADMIN_PASSWORD: a
    common, numeric or too short password is refused, saying why (CommandError)."""
    user = get_user_model()(username=ADMIN_USERNAME)
    try:
        validate_password(password, user=user)
    except ValidationError as error:
        raise CommandError(
            "DETECTIVE_ADMIN_PASSWORD is refused: "
            + " ".join(error.messages)
            + " Choose another, or leave it unset to have one generated."
        ) from None


def ensure_admin(password: str | None) -> str | None:
    """Make sure the superuser `admin` exists and can log in.

    With a password (DETECTIVE_ADMIN_PASSWORD) the account always gets that password. Without
    one, a new account gets a generated password, which is returned so that it can be shown
    once; an existing account keeps its password.
    """
    user_model = get_user_model()
    user = user_model.objects.filter(username=ADMIN_USERNAME).first()
    if user is None:
        generated = None if password else secrets.token_urlsafe(12)
        user_model.objects.create_superuser(
            username=ADMIN_USERNAME, email="", password=password or generated
        )
        return generated
    changed = False
    if password and not user.check_password(password):
        user.set_password(password)
        changed = True
    for flag in ("is_superuser", "is_staff", "is_active"):
        if not getattr(user, flag):
            setattr(user, flag, True)
            changed = True
    if changed:
        user.save()
    return None


# Launchers that start `up` as their child and forward a stop signal to it, but leave it
# running when they are killed outright: `uv run manage.py up`, the documented start.
LAUNCHERS = frozenset({"uv"})


def launcher_pid() -> int | None:
    """The parent's pid when it is a launcher (`LAUNCHERS`), so that `up` stops when it is
    gone (kill -9 of `uv`); None otherwise. A shell, nohup or systemd leaving is no reason to
    stop, so any other parent is not watched."""
    parent = os.getppid()
    try:
        name = Path(f"/proc/{parent}/comm").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return parent if name in LAUNCHERS else None


def port_is_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def accepts_connections(host: str, port: int) -> bool:
    target = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    try:
        with socket.create_connection((target, port), timeout=0.5):
            return True
    except OSError:
        return False


def supervised_model_server(
    paths: LocalModelPaths, port: int, *, context: int = DEFAULT_CONTEXT
) -> ChildSpec:
    """llama-server as a child of the supervisor: the others start once it is healthy."""
    paths.logs_dir.mkdir(parents=True, exist_ok=True)
    return ChildSpec(
        "local model server",
        serve.server_argv(paths, port, context=context),
        ready=lambda: serve.health(port) == "ok",
        ready_timeout=HEALTH_TIMEOUT,
        output=paths.server_log,
    )


class StartupProblem(RuntimeError):
    """Something `up` needs does not answer; the message says which variable to look at."""


def _where(url: str) -> str:
    """host:port of a URL, never its password."""
    parts = urlsplit(url)
    host = parts.hostname or parts.path or "?"
    return f"{host}:{parts.port}" if parts.port else host


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def check_database() -> None:
    try:
        connections["default"].ensure_connection()
    except Exception as exc:
        database = settings.CONFIG.database_url
        where = _where(database) if database else str(settings.CONFIG.sqlite_path)
        raise StartupProblem(
            f"Cannot reach the database at {where} ({_first_line(exc)}); check DATABASE_URL "
            "and that the database server runs."
        ) from exc


def check_redis() -> None:
    url = settings.CONFIG.redis_url
    if not url:
        return
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        raise StartupProblem(
            f"Cannot reach Redis at {_where(url)} ({_first_line(exc)}); check REDIS_URL and "
            "that Redis runs (or unset REDIS_URL to run without a broker)."
        ) from exc


class Command(BaseCommand):
    help = (
        "Start Detective: migrate, seed demo data if empty, ensure the admin user, then run the "
        "web server and the task worker until Ctrl+C."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="Address to serve on.")
        parser.add_argument("--port", type=int, default=8000, help="Port to serve on.")
        parser.add_argument(
            "--stop-timeout",
            type=float,
            default=5.0,
            help="Seconds to let the processes stop gracefully before killing them.",
        )
        parser.add_argument(
            "--debug",
            action="store_true",
            help=(
                "Run with DEBUG on (tracebacks on error pages). Without it (and without "
                "DEBUG=true), the site runs with DEBUG off, its generated secret key and host "
                "names from --host. manage.py reads this before the settings load."
            ),
        )
        parser.add_argument(
            "--verbose",
            action="store_true",
            help="With a start-up error, print its traceback too (it is one line otherwise).",
        )
        parser.add_argument(
            "--prepare-only",
            action="store_true",
            help="Migrate, seed and ensure the admin user, then exit without serving.",
        )

    seeded = False

    def handle(self, *args: Any, **options: Any) -> None:
        host: str = options["host"]
        port: int = options["port"]
        verbosity: int = options["verbosity"]
        if not options["prepare_only"] and not port_is_free(host, port):
            raise CommandError(f"{host}:{port} is already in use; choose another with --port.")

        self.preflight(verbose=options["verbose"])
        self.prepare(verbosity)
        if options["prepare_only"]:
            return

        children = [
            # A web server that dies is started again (the worker and its run go on: its
            # tools retry a request that found no server); a worker that dies is started
            # again while the web server keeps serving. The same back-off and give-up rule.
            ChildSpec("web server", self.web_argv(host, port, verbosity), restart=True),
            ChildSpec(
                "task worker",
                self.worker_argv(verbosity),
                restart=True,
                on_exit=self.fail_runs_of_dead_worker,
            ),
        ]
        model_child, model_env = self.local_model_server()
        if model_child is not None:
            children.insert(0, model_child)
        supervisor = Supervisor(
            children,
            watch_parent=launcher_pid(),
            stop_timeout=options["stop_timeout"],
            cwd=BASE_DIR,
            env=self.child_environment(host, port, model_env),
            log=lambda line: self.stderr.write(line),
        )
        url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/"

        def announce() -> None:
            self.stdout.write(
                self.style.SUCCESS(f"Detective is running at {url}")
                + "  (log in as admin; press Ctrl+C to stop)"
            )
            if self.seeded:
                self.stdout.write(
                    "The demo shop's production traffic (its spans, through OpenTelemetry): "
                    f"`uv run manage.py demo_traffic --url {url.rstrip('/')}` in another terminal."
                )

        try:
            code = supervisor.run(ready=lambda: accepts_connections(host, port), on_ready=announce)
        except ChildNotReady as exc:
            raise CommandError(f"{exc} See {self.model_paths().server_log}.") from None
        self.stdout.write("Stopped.")
        if code:
            raise CommandError("A process exited unexpectedly; see the output above.")

    def preflight(self, *, verbose: bool) -> None:
        """The database and Redis answer; otherwise one line that names the variable."""
        for check in (check_database, check_redis):
            try:
                check()
            except StartupProblem as problem:
                if verbose:
                    cause = problem.__cause__ or problem
                    self.stderr.write("".join(traceback.format_exception(cause)))
                raise CommandError(str(problem)) from None

    def fail_runs_of_dead_worker(self, code: int) -> None:
        """The worker died: its run fails now, with the reason, not when a restarted worker
        or the stale-run sweep gets to it."""
        close_old_connections()
        try:
            for run in services.fail_orphaned_runs():
                self.stderr.write(f"Run {run.pk} failed: {run.error or 'its worker died'}")
        finally:
            close_old_connections()

    def prepare(self, verbosity: int) -> None:
        # Before anything is changed: a weak admin password stops `up` at once, saying why.
        if settings.CONFIG.admin_password:
            check_admin_password(settings.CONFIG.admin_password.get_secret_value())
        self.stdout.write("Applying database migrations ...")
        call_command("migrate", interactive=False, verbosity=max(verbosity - 1, 0))
        # Runs stranded by a crash of the last `up` are resolved before anything else.
        for run in services.fail_orphaned_runs():
            self.stderr.write(f"Run {run.pk} was left running by a worker that is gone: failed.")
        if not settings.DEBUG:
            call_command("collectstatic", interactive=False, verbosity=max(verbosity - 1, 0))
        if not Release.objects.exists():
            call_command("seed_demo", verbosity=verbosity, stdout=self.stdout)
            # Not run here: the shop's two processes and their requests cost seconds of CPU
            # that a first start should not wait for (docs/using/errors-and-traces.md).
            self.seeded = True
        admin_password = settings.CONFIG.admin_password
        generated = ensure_admin(admin_password.get_secret_value() if admin_password else None)
        if generated:
            self.stdout.write(
                self.style.WARNING(
                    f"Created the superuser '{ADMIN_USERNAME}' with the password: {generated}\n"
                    "It is shown only this once. Set DETECTIVE_ADMIN_PASSWORD to choose your own."
                )
            )

    @staticmethod
    def model_paths() -> LocalModelPaths:
        return LocalModelPaths.for_data_dir(settings.CONFIG.data_dir)

    def local_model_server(self) -> tuple[ChildSpec | None, dict[str, str]]:
        """The llama-server child and the environment that points the agent at it, when
        the local model is to be used; prints how to set one up when no model is."""
        config = settings.CONFIG
        paths = self.model_paths()
        plan = serve.plan_for_up(
            paths,
            provider=config.provider,
            base_url=config.base_url,
            hosted_key=any(
                (config.anthropic_api_key, config.openai_api_key, config.openrouter_api_key)
            ),
        )
        if plan.guidance:
            self.stderr.write(self.style.WARNING(plan.guidance))
        if not plan.start_local:
            return None, {}
        if (running := serve.running_server(paths)) and serve.health(running.port) == "ok":
            self.stdout.write(f"Using the local model already served at {running.url}.")
            return None, serve.agent_environment(running.port)
        model_port = serve.free_port()
        self.stdout.write(
            f"Starting the local model ({MODEL.alias}) on 127.0.0.1:{model_port}; "
            f"its log: {paths.server_log}"
        )
        child = supervised_model_server(paths, model_port)
        return child, serve.agent_environment(model_port)

    @staticmethod
    def web_argv(host: str, port: int, verbosity: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            # daphne, with answers (431) to requests whose headers are too large
            "detective_site.web_server",
            "--bind",
            host,
            "--port",
            str(port),
            "--verbosity",
            str(verbosity),
            ":".join(settings.ASGI_APPLICATION.rsplit(".", 1)),
        ]

    @staticmethod
    def child_environment(host: str, port: int, extra: dict[str, str]) -> dict[str, str]:
        """The children's environment: the agent's tools call this web server's API (unless
        DETECTIVE_API_URL points them elsewhere)."""
        environment = {**os.environ, **extra}
        if not environment.get("DETECTIVE_API_URL"):
            local = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
            address = f"[{local}]" if ":" in local else local
            environment["DETECTIVE_API_URL"] = f"http://{address}:{port}"
        return environment

    @staticmethod
    def worker_argv(verbosity: int) -> list[str]:
        return [
            sys.executable,
            str(BASE_DIR / "manage.py"),
            "run_worker",
            "--verbosity",
            str(verbosity),
            "--",
            "--no-reload",
            "--no-startup-delay",
            "--interval",
            "0.5",
            "--verbosity",
            str(verbosity),
        ]
