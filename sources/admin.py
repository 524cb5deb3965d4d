"""The admin of the sources app: services, ingestion tokens (the secret is shown once, on the
page that follows its creation, and only its hash is stored) and the ingestions' log."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from releases.models import Service
from sources import services
from sources.models import Ingestion, IngestionToken


@admin.register(Service)
class ServiceAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    prepopulated_fields = {"slug": ["name"]}
    search_fields = ["name", "slug"]


@admin.register(IngestionToken)
class IngestionTokenAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "prefix",
        "service",
        "created_by",
        "created_at",
        "last_used_at",
        "revoked",
    ]
    list_filter = ["revoked", "service"]
    readonly_fields = ["prefix", "created_by", "created_at", "last_used_at"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return ["name", "service"]
        return ["name", "service", "revoked", "prefix", "created_by", "created_at", "last_used_at"]

    def save_model(
        self, request: HttpRequest, obj: IngestionToken, form: Any, change: bool
    ) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, secret = services.create_token(obj.name, obj.service, request.user)
        obj.pk = token.pk
        obj.refresh_from_db()
        # Kept on the request only, for the page shown next: never stored, never in a message
        # (messages travel in cookies).
        request._new_token_secret = secret  # type: ignore[attr-defined]

    def response_add(
        self, request: HttpRequest, obj: IngestionToken, post_url_continue: Any = None
    ) -> HttpResponse:
        secret = getattr(request, "_new_token_secret", None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": "Ingestion token created",
            "token": obj,
            "secret": secret,
            "opts": self.model._meta,
        }
        response = TemplateResponse(request, "admin/sources/token_created.html", context)
        response["Cache-Control"] = "no-store"
        return response


@admin.register(Ingestion)
class IngestionAdmin(admin.ModelAdmin):
    list_display = [
        "created_at",
        "release",
        "kind",
        "origin",
        "token",
        "user",
        "file_list",
        "counts",
    ]
    list_filter = ["kind", "origin"]
    list_select_related = ["release", "token", "user"]
    search_fields = ["release__version", "file_names"]

    @admin.display(description="files")
    def file_list(self, ingestion: Ingestion) -> str:
        return ", ".join(ingestion.file_names)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
