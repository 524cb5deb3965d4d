"""Webhooks go outward only: inward endpoints are refused by the model itself (admin, shell,
code alike) unless their network is allowed, and again at delivery time; an attempt has one
deadline for connect, send and read together."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from webhooks import services, targets
from webhooks.models import WebhookDelivery, WebhookEndpoint

SECRET = "whsec-0123456789abcdef"
INWARD = [
    ("http://127.0.0.1/hook", "loopback"),
    ("http://127.0.0.1:5432/", "loopback"),
    ("http://[::1]:8000/admin/", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("https://10.0.0.1/hook", "private"),
    ("http://192.168.1.20/hook", "private"),
    ("http://0.0.0.0:8000/", "unspecified"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://100.64.0.1/", "not public"),
    # Issue 37: the translation prefixes (an IPv4 address inside) and special-purpose ranges.
    ("http://[64:ff9b::7f00:1]/", "NAT64 translation"),
    ("http://[64:ff9b::a00:1]/", "NAT64 translation"),
    ("http://[64:ff9b::808:808]/", "NAT64 translation"),
    ("http://[64:ff9b:1::a00:1]/", "NAT64 translation"),
    ("http://[2002:7f00:1::1]/", "6to4"),
    ("http://[2002:a9fe:a9fe::]/", "6to4"),
    ("http://[::7f00:1]/", "IPv4-compatible"),
    ("http://[::a9fe:a9fe]/", "IPv4-compatible"),
    ("http://[fec0::1]/", "site-local"),
    ("http://[fefe::1]/", "site-local"),
    ("http://192.0.0.1/", "IETF protocol assignments"),
    ("http://192.0.0.170/", "IETF protocol assignments"),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "Teredo"),
]


@pytest.fixture(autouse=True)
def _nothing_allowed(settings: Any) -> None:
    settings.WEBHOOK_ALLOWED_NETWORKS = []


def resolving_to(monkeypatch: pytest.MonkeyPatch, **names: str) -> None:
    def resolve(host: str, port: int) -> list[str]:
        if host not in names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [names[host]]

    monkeypatch.setattr(targets, "resolver", resolve)


@pytest.mark.parametrize(("url", "kind"), INWARD)
def test_an_inward_address_is_refused_saying_why(url: str, kind: str) -> None:
    with pytest.raises(targets.TargetRefused, match=f"is a {kind} address"):
        targets.check(url)


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "kind"), INWARD)
def test_the_model_refuses_it_in_clean_and_in_save(url: str, kind: str) -> None:
    hook = WebhookEndpoint(name="x", url=url, secret=SECRET)
    with pytest.raises(ValidationError, match=kind) as refused:
        hook.full_clean()
    assert "DETECTIVE_WEBHOOK_ALLOWED_NETWORKS" in str(refused.value)
    # The shell's way: no form, no full_clean.
    with pytest.raises(ValidationError):
        WebhookEndpoint.objects.create(name="x", url=url, secret=SECRET)
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
def test_a_name_that_resolves_inward_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    resolving_to(monkeypatch, **{"hooks.internal.example": "127.0.0.1"})
    with pytest.raises(ValidationError, match=r"hooks.internal.example \(127.0.0.1\) is a loop"):
        WebhookEndpoint.objects.create(
            name="x", url="https://hooks.internal.example/d", secret=SECRET
        )


@pytest.mark.django_db
def test_localhost_is_refused_through_the_real_resolver() -> None:
    with pytest.raises(ValidationError, match="loopback"):
        WebhookEndpoint.objects.create(name="x", url="http://localhost:8000/", secret=SECRET)


@pytest.mark.django_db
def test_an_allowed_network_and_a_public_address_are_kept(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.20.0.0/16"]
    resolving_to(monkeypatch, **{"hooks.example.com": "93.184.215.14"})
    WebhookEndpoint.objects.create(name="onprem", url="http://10.20.3.4/hook", secret=SECRET)
    WebhookEndpoint.objects.create(name="out", url="https://hooks.example.com/d", secret=SECRET)
    assert WebhookEndpoint.objects.count() == 2
    with pytest.raises(ValidationError, match="private"):
        WebhookEndpoint.objects.create(name="no", url="http://10.21.0.1/hook", secret=SECRET)


@pytest.mark.django_db
def test_the_admin_form_shows_the_reason(admin_client: Any) -> None:
    answer = admin_client.post(
        "/admin/webhooks/webhookendpoint/add/",
        {"name": "meta", "url": "http://169.254.169.254/", "secret": SECRET, "active": "on"},
    )
    assert answer.status_code == 200
    assert "link-local address: webhooks go outward only" in answer.content.decode()
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
def test_delivery_checks_again_and_never_connects_inward(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolving_to(monkeypatch, **{"hooks.example.com": "93.184.215.14"})
    hook = WebhookEndpoint.objects.create(
        name="out", url="http://hooks.example.com/d", secret=SECRET
    )
    # The name now points inside (DNS changed, or a rebinding attacker).
    resolving_to(monkeypatch, **{"hooks.example.com": "127.0.0.1"})
    connected: list[object] = []
    monkeypatch.setattr(services, "_post", lambda *args: connected.append(args))
    record = services.attempt_delivery(
        endpoint_id=hook.pk, delivery_id=services.new_delivery_id(), event="ping",
        service="-", version="-", body="{}", attempt=1,
    )  # fmt: skip
    assert record is not None
    assert connected == []
    assert record.error.startswith("refused: hooks.example.com (127.0.0.1) is a loopback")
    assert (record.succeeded, record.response_excerpt, record.status_code) == (False, "", None)


@pytest.fixture
def drip() -> Iterator[str]:
    """A receiver on loopback that answers one byte a second, for a minute."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n" + b"x" * 40:
                    if stop.wait(1.0):
                        break
                    try:
                        conn.sendall(bytes([byte]))
                    except OSError:
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(5)
        server.close()


@pytest.mark.django_db
def test_one_deadline_for_the_whole_attempt(settings: Any, drip: str) -> None:
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.WEBHOOK_TIMEOUT_S = 2.0
    hook = WebhookEndpoint.objects.create(name="drip", url=drip, secret=SECRET)
    started = time.monotonic()
    record = services.attempt_delivery(
        endpoint_id=hook.pk, delivery_id=services.new_delivery_id(), event="ping",
        service="-", version="-", body="{}", attempt=1,
    )  # fmt: skip
    took = time.monotonic() - started
    # Each byte came within a second, so no per-read timeout would ever have fired.
    assert record is not None and record.error == "no answer within 2 s"
    assert 1.9 <= took < 3.0
    assert WebhookDelivery.objects.get().response_excerpt == ""


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "192.0.1.1", "2003::1"]
)
def test_public_addresses_beside_the_special_ranges_are_kept(address: str) -> None:
    assert targets.kind_of(targets.ipaddress.ip_address(address)) is None
