"""Webhook deliveries: which endpoints want an event, the body they get, and one attempt to
deliver it (logged, with the time of the next attempt when it failed and attempts remain).

Queuing and retrying are `tasks.py`'s: this module never enqueues, so the task can call it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from datetime import timedelta

import httpx
from django.conf import settings
from django.utils import timezone

from releases.models import Release
from releases.selectors import release_verdict
from webhooks import targets
from webhooks.models import WebhookDelivery, WebhookEndpoint
from webhooks.signing import HEADER, sign

log = logging.getLogger(__name__)

USER_AGENT = "Detective-Webhooks/1"
# The wait before attempts 2, 3, 4 and 5; the fifth is the last.
RETRY_DELAYS_S: tuple[float, ...] = (10, 60, 300, 1800)
# One attempt's whole time (connect, send, read): the most a receiver can hold a worker, so
# the most an assessment queued behind a delivery waits for it (docs/using/configuration.md).
TIMEOUT_S = 10.0
EXCERPT_CHARS = 500
EXCERPT_BYTES = 4 * EXCERPT_CHARS


def delivery_deadline() -> float:
    """Seconds one attempt may take in all: connect, send and read together."""
    return float(getattr(settings, "WEBHOOK_TIMEOUT_S", TIMEOUT_S))


async def _post(
    url: str, target: targets.Target, data: bytes, headers: dict[str, str], deadline: float
) -> tuple[int, str, str]:
    """POST to the checked address (the URL's host in the Host header and, for https, in
    the TLS handshake and the certificate check); the status, its reason and the answer's
    first EXCERPT_CHARS characters. Only the excerpt is read, never the whole answer."""
    parts = httpx.URL(url)
    pinned = parts.copy_with(host=str(target.address))
    request_headers = {**headers, "Host": parts.netloc.decode("ascii")}
    async with httpx.AsyncClient(timeout=deadline, follow_redirects=False) as client:
        request = client.build_request(
            "POST",
            pinned,
            content=data,
            headers=request_headers,
            extensions={"sni_hostname": target.host},
        )
        response = await client.send(request, stream=True)
        try:
            taken = bytearray()
            async for chunk in response.aiter_bytes():
                taken += chunk
                if len(taken) >= EXCERPT_BYTES:
                    break
        finally:
            await response.aclose()
    text = bytes(taken[:EXCERPT_BYTES]).decode(response.encoding or "utf-8", "replace")
    return response.status_code, response.reason_phrase, text[:EXCERPT_CHARS]


def retry_delays() -> tuple[float, ...]:
    return tuple(getattr(settings, "WEBHOOK_RETRY_DELAYS_S", RETRY_DELAYS_S))


def max_attempts() -> int:
    return len(retry_delays()) + 1


def endpoints_for(release: Release) -> list[WebhookEndpoint]:
    service = release.service
    return [
        endpoint
        for endpoint in WebhookEndpoint.objects.filter(active=True)
        if endpoint.wants(service.slug, service.name)
    ]


def event_body(release: Release, event: str) -> str:
    """The verdict's JSON (what GET /api/releases/<version>/verdict answers), with the event,
    the service and the release page's path and address."""
    path = release.get_absolute_url()
    base = (getattr(settings, "DETECTIVE_API_URL", None) or "").rstrip("/")
    body = {
        **release_verdict(release).as_json(),
        "event": event,
        "service": release.service.slug,
        "release_path": path,
        # As the verdict API answers: the page's address (this site's, when it knows it).
        "url": f"{base}{path}",
    }
    return json.dumps(body, ensure_ascii=False, sort_keys=True)


def new_delivery_id() -> str:
    return str(uuid.uuid4())


def attempt_delivery(
    *,
    endpoint_id: int,
    delivery_id: str,
    event: str,
    service: str,
    version: str,
    body: str,
    attempt: int,
) -> WebhookDelivery | None:
    """POST the body once, signed now, and log the attempt. None when the endpoint was deleted
    or switched off since the event (nothing is sent)."""
    endpoint = WebhookEndpoint.objects.filter(pk=endpoint_id, active=True).first()
    if endpoint is None:
        return None
    data = body.encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        HEADER: sign(endpoint.secret, data),
        "Detective-Event": event,
        "Detective-Delivery": delivery_id,
        "Detective-Attempt": str(attempt),
    }
    deadline = delivery_deadline()
    status: int | None = None
    excerpt = error = ""
    started = time.perf_counter()
    try:
        target = targets.check(endpoint.url)
    except targets.TargetRefused as refused:
        # Checked again here: the name may resolve elsewhere now than when it was saved.
        target, error = None, f"refused: {refused}"
    if target is not None:
        try:
            status, reason, excerpt = asyncio.run(
                asyncio.wait_for(_post(endpoint.url, target, data, headers, deadline), deadline)
            )
            if not 200 <= status < 300:
                error = f"answered {status} {reason}".strip()
        except (TimeoutError, httpx.TimeoutException):
            error = f"no answer within {deadline:g} s"
        except httpx.HTTPError as failure:
            error = f"{type(failure).__name__}: {failure}"
    duration_ms = round((time.perf_counter() - started) * 1000)
    succeeded = not error
    delays = retry_delays()
    next_at = None
    if not succeeded and attempt <= len(delays):
        next_at = timezone.now() + timedelta(seconds=delays[attempt - 1])
    record = WebhookDelivery.objects.create(
        endpoint=endpoint,
        delivery_id=delivery_id,
        event=event,
        service=service,
        version=version,
        attempt=attempt,
        status_code=status,
        succeeded=succeeded,
        error=error,
        response_excerpt=excerpt,
        duration_ms=duration_ms,
        next_attempt_at=next_at,
    )
    # The endpoint by name only: neither its secret nor its URL (which may carry a token).
    log.info(
        "webhook %s of %s %s to %r: attempt %d, %s in %d ms%s",
        event,
        service,
        version,
        endpoint.name,
        attempt,
        "delivered" if succeeded else error,
        duration_ms,
        f", next attempt at {next_at.isoformat()}" if next_at else "",
    )
    return record
