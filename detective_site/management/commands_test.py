"""The `up` command (tests live here: a module inside commands/ is a command)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from pydantic import SecretStr
from pytest_django import Settings

from detective_site.management.commands.up import Command as UpCommand
from detective_site.management.commands.up import ensure_admin, port_is_free
from releases.models import Release
from sources.demo_releases import DEMO_RELEASES

pytestmark = pytest.mark.django_db


def test_ensure_admin_generates_a_password_only_for_a_new_account() -> None:
    generated = ensure_admin(None)
    assert generated
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser
    assert admin.check_password(generated)
    assert ensure_admin(None) is None
    admin.refresh_from_db()
    assert admin.check_password(generated)


def test_ensure_admin_applies_the_configured_password_and_restores_rights() -> None:
    assert ensure_admin("first-password") is None
    user_model = get_user_model()
    user_model.objects.filter(username="admin").update(is_staff=False, is_active=False)
    assert ensure_admin("second-password") is None
    admin = user_model.objects.get(username="admin")
    assert admin.check_password("second-password")
    assert admin.is_staff
    assert admin.is_active


def test_up_prepare_only_migrates_seeds_and_prints_the_password_once(
    settings: Settings,
) -> None:
    settings.CONFIG = settings.CONFIG.model_copy(update={"admin_password": None})
    out = StringIO()
    call_command("up", "--prepare-only", stdout=out)
    assert Release.objects.count() == len(DEMO_RELEASES)
    assert "with the password:" in out.getvalue()

    out = StringIO()
    call_command("up", "--prepare-only", stdout=out)
    assert "password" not in out.getvalue()
    assert "Demo data" not in out.getvalue()  # not seeded again: there are releases


def test_up_uses_the_configured_admin_password(settings: Settings) -> None:
    settings.CONFIG = settings.CONFIG.model_copy(
        update={"admin_password": SecretStr("from-the-environment")}
    )
    out = StringIO()
    call_command("up", "--prepare-only", stdout=out)
    assert "password" not in out.getvalue()
    assert get_user_model().objects.get(username="admin").check_password("from-the-environment")


def test_up_starts_daphne_and_the_worker_with_host_and_port() -> None:
    web = UpCommand.web_argv("0.0.0.0", 9000, 1)
    assert web[1:3] == ["-m", "detective_site.web_server"]  # daphne, answering big headers
    assert web[web.index("--bind") + 1] == "0.0.0.0"
    assert web[web.index("--port") + 1] == "9000"
    assert web[-1] == "detective_site.asgi:application"
    worker = UpCommand.worker_argv(1)
    assert "run_worker" in worker  # db_worker, plus the sweep of runs whose worker died
    assert "--no-reload" in worker  # the autoreloader would add a process of its own


def test_up_gives_the_worker_the_address_of_its_web_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DETECTIVE_API_URL", raising=False)
    assert UpCommand.child_environment("0.0.0.0", 9000, {})["DETECTIVE_API_URL"] == (
        "http://127.0.0.1:9000"
    )
    assert UpCommand.child_environment("::", 9000, {})["DETECTIVE_API_URL"] == "http://[::1]:9000"
    monkeypatch.setenv("DETECTIVE_API_URL", "https://releases.example.com")
    environment = UpCommand.child_environment("127.0.0.1", 9000, {"X": "1"})
    assert environment["DETECTIVE_API_URL"] == "https://releases.example.com"
    assert environment["X"] == "1"


def test_port_is_free() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert not port_is_free("127.0.0.1", port)


@pytest.mark.parametrize(
    ("password", "why"),
    [
        ("password", "too common"),
        ("12345678", "entirely numeric"),
        ("qwertyuiop", "too common"),
    ],
)
def test_up_refuses_a_weak_admin_password_saying_why(
    settings: Settings, password: str, why: str
) -> None:
    settings.CONFIG = settings.CONFIG.model_copy(update={"admin_password": SecretStr(password)})
    with pytest.raises(CommandError) as refused:
        call_command("up", "--prepare-only", stdout=StringIO())
    message = str(refused.value)
    assert "DETECTIVE_ADMIN_PASSWORD is refused" in message and why in message
    assert f"'{password}'" not in message and f": {password}" not in message  # never echoed
    assert not get_user_model().objects.filter(username="admin").exists()
