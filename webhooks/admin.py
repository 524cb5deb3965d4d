"""The webhooks in the admin: endpoints with their secret kept as a secret (typed once, never
shown back: only its last four characters), and every delivery attempt, read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from webhooks import tasks
from webhooks.models import WebhookDelivery, WebhookEndpoint

SECRET_MIN_LENGTH = 16


class EndpointForm(forms.ModelForm):
    url = forms.URLField(
        max_length=500,
        assume_scheme="https",
        label="URL",
        help_text="Where the POST goes (https:// in production).",
    )
    secret = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=(
            f"At least {SECRET_MIN_LENGTH} characters; the receiver checks the signature with it. "
            "It is never shown again: leave empty to keep the current one."
        ),
    )

    class Meta:
        model = WebhookEndpoint
        fields = ["name", "url", "secret", "service", "active"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Never sent back to the browser, not even in the form's initial data.
        self.initial.pop("secret", None)

    def clean_secret(self) -> str:
        typed = self.cleaned_data.get("secret", "")
        if not typed:
            if self.instance.pk and self.instance.secret:
                return self.instance.secret
            raise forms.ValidationError("A new endpoint needs a secret.")
        if len(typed) < SECRET_MIN_LENGTH:
            raise forms.ValidationError(f"Use at least {SECRET_MIN_LENGTH} characters.")
        return typed


class DeliveryInline(admin.TabularInline):
    model = WebhookDelivery
    fields = ["created_at", "event", "version", "attempt", "status_code", "succeeded", "error"]
    readonly_fields = fields
    ordering = ["-created_at", "-id"]
    extra = 0
    max_num = 0
    show_change_link = True
    can_delete = False
    verbose_name_plural = "latest deliveries"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = EndpointForm
    list_display = ["name", "url", "service_shown", "active", "secret_hint", "last_delivery"]
    list_filter = ["active"]
    search_fields = ["name", "url", "service"]
    readonly_fields = ["secret_hint", "created_at"]
    inlines = [DeliveryInline]
    actions = ["send_test"]

    @admin.action(description="Send a test delivery (event: ping)")
    def send_test(self, request: HttpRequest, endpoints: QuerySet[WebhookEndpoint]) -> None:
        active = [endpoint for endpoint in endpoints if endpoint.active]
        for endpoint in active:
            tasks.queue_ping(endpoint)
        self.message_user(
            request,
            f"{len(active)} test deliveries queued; a worker sends them and logs each below.",
            messages.SUCCESS,
        )

    @admin.display(description="service")
    def service_shown(self, endpoint: WebhookEndpoint) -> str:
        return endpoint.service or "every service"

    @admin.display(description="secret")
    def secret_hint(self, endpoint: WebhookEndpoint) -> str:
        return endpoint.secret_hint if endpoint.pk else "-"

    @admin.display(description="last delivery")
    def last_delivery(self, endpoint: WebhookEndpoint) -> str:
        latest = endpoint.deliveries.order_by("-created_at", "-id").first()
        if latest is None:
            return "none yet"
        outcome = "delivered" if latest.succeeded else (latest.error or "failed")
        return f"{latest.created_at:%Y-%m-%d %H:%M} UTC: {outcome}"


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    # One "outcome" column for the attempt's figures: ten columns cut the list at 1280 px
    # (issue 37); the delivery's page has each field.
    list_display = ["created_at", "endpoint", "event", "service", "version", "outcome", "error"]
    list_filter = ["succeeded", "event", "endpoint"]
    search_fields = ["version", "service", "error", "delivery_id"]
    list_select_related = ["endpoint"]
    fields = [
        "endpoint",
        "delivery_id",
        "event",
        "service",
        "version",
        "attempt",
        "status_code",
        "succeeded",
        "error",
        "response_excerpt",
        "duration_ms",
        "next_attempt_at",
        "created_at",
    ]
    readonly_fields = fields

    @admin.display(description="outcome", ordering="succeeded")
    def outcome(self, delivery: WebhookDelivery) -> str:
        answer = f"HTTP {delivery.status_code}" if delivery.status_code else "no answer"
        done = "delivered" if delivery.succeeded else "failed"
        return f"{done}: {answer} in {delivery.duration_ms:,} ms, attempt {delivery.attempt}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
