"""Webhook endpoints (configured in the admin) and the log of every delivery attempt."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from webhooks import targets


class WebhookEndpoint(models.Model):
    """A URL that gets a signed JSON POST when a verdict is filed or decided.

    The secret signs the deliveries; it is kept as the receiver needs it (an HMAC key cannot
    be hashed) but never shown back in full: the admin shows its last four characters, and
    neither `str()` nor the logs include it."""

    name = models.CharField(max_length=100)
    url = models.URLField(max_length=500, help_text="Where the POST goes (https:// in production).")
    secret = models.CharField(max_length=200, help_text="The HMAC-SHA256 key the receiver checks.")
    service = models.CharField(
        max_length=100,
        blank=True,
        help_text="Only this service's releases (its slug or name); empty: every service.",
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Here too, not only in clean(): the shell and any code that creates an endpoint
        # without a form are refused alike.
        self.clean()
        super().save(*args, **kwargs)

    def clean(self) -> None:
        super().clean()
        try:
            targets.check(self.url)
        except targets.Unresolved:
            # A name that does not resolve yet (a receiver still being set up) is kept: every
            # delivery checks the address it resolves to then, and refuses an inward one.
            pass
        except targets.TargetRefused as refused:
            raise ValidationError({"url": str(refused)}) from None

    @property
    def secret_hint(self) -> str:
        return f"…{self.secret[-4:]}" if len(self.secret) >= 12 else "(set)"

    def wants(self, service_slug: str, service_name: str) -> bool:
        wanted = self.service.strip().casefold()
        return not wanted or wanted in (service_slug.casefold(), service_name.casefold())


class Event(models.TextChoices):
    FILED = "verdict.filed", "Verdict filed"
    DECIDED = "verdict.decided", "Verdict decided"
    PING = "ping", "Test (from the admin)"


class WebhookDelivery(models.Model):
    """One attempt to deliver one event to one endpoint. The attempts of a delivery share its
    `delivery_id` (sent as `Detective-Delivery`, so a receiver can drop a repeat)."""

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    delivery_id = models.UUIDField(default=uuid.uuid4, db_index=True)
    event = models.CharField(max_length=32, choices=Event.choices)
    service = models.CharField(max_length=100)
    version = models.CharField(max_length=100)
    attempt = models.PositiveSmallIntegerField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    succeeded = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    response_excerpt = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return (
            f"{self.event} {self.service} {self.version} → {self.endpoint} (attempt {self.attempt})"
        )
