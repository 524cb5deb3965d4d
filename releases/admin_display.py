"""Small rendering helpers shared by the admin classes of both apps."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from releases.validation import BodyError, parse_json_body

# An admin box holds one release field: 400 changes are about 40 KB.
ADMIN_JSON_MAX_BYTES = 1024 * 1024
MISSING = mark_safe('<span style="color:#8a93a5;font-style:italic">missing</span>')

SEVERITY_COLOURS = {
    "high": ("#c62828", "#fdecec"),
    "medium": ("#b26a00", "#fff4e0"),
    "low": ("#1e7d3a", "#e7f6ec"),
}
STATUS_COLOURS = {
    "queued": ("#5b6578", "#eef0f4"),
    "running": ("#b26a00", "#fff4e0"),
    "succeeded": ("#1e7d3a", "#e7f6ec"),
    "failed": ("#c62828", "#fdecec"),
    "cancelled": ("#5b6578", "#eef0f4"),
}


def pretty_json(value: Any) -> SafeString:
    """JSON indented in a <pre>, or "missing" for None."""
    if value is None:
        return MISSING
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    return format_html(
        '<pre style="margin:0;white-space:pre-wrap;max-width:60rem;font-size:12px">{}</pre>', text
    )


def pre(text: str) -> SafeString:
    if not text:
        return format_html("{}", "—")
    return format_html('<pre style="margin:0;white-space:pre-wrap;max-width:60rem">{}</pre>', text)


def excerpt(text: str, words: int = 16) -> str:
    return Truncator(text).words(words) if text else "—"


def change_link(obj: models.Model | None, label: str | SafeString | None = None) -> SafeString:
    """A link to the admin change page of `obj`, or a dash when there is none."""
    if obj is None:
        return format_html("{}", "—")
    meta = obj._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label if label is not None else str(obj))


def changelist_link(model: type[models.Model], label: str, **filters: Any) -> SafeString:
    meta = model._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
    query = "&".join(f"{key}={value}" for key, value in filters.items())
    return format_html('<a href="{}?{}">{}</a>', url, query, label)


def pill(text: str, colours: tuple[str, str]) -> SafeString:
    ink, background = colours
    return format_html(
        '<span style="display:inline-block;padding:1px 9px;border-radius:999px;font-weight:600;'
        'font-size:11px;color:{};background:{}">{}</span>',
        ink,
        background,
        text,
    )


def severity_pill(severity: str | None) -> SafeString:
    if not severity:
        return pill("not assessed", ("#5b6578", "#eef0f4"))
    return pill(severity, SEVERITY_COLOURS.get(severity, ("#5b6578", "#eef0f4")))


def status_pill(status: str) -> SafeString:
    return pill(status, STATUS_COLOURS.get(status, ("#5b6578", "#eef0f4")))


class PrettyJSONFormField(forms.JSONField):
    """An editable JSON field shown indented; an empty box means missing (NULL).

    The box is parsed as the API parses a body (`releases.validation.parse_json_body`): NaN,
    Infinity, a key twice, nesting past the limit, NUL and lone surrogates are refused with a
    message, never raised (Django's own field lets RecursionError and the 4,300-digit integer
    ValueError through, a 500).
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 8, "cols": 80}))
        super().__init__(**kwargs)
        self.widget.attrs.setdefault("style", "font-family:monospace;font-size:12px")

    def _parse(self, text: str) -> Any:
        try:
            return parse_json_body(
                text.encode("utf-8", "surrogatepass"), max_bytes=ADMIN_JSON_MAX_BYTES
            )
        except BodyError as error:
            message = str(error).replace("the body", "the value")
            raise ValidationError(f"Not accepted: {message}.", code="invalid") from None

    def to_python(self, value: Any) -> Any:
        if self.disabled:
            return value
        if value in self.empty_values:
            return None
        if not isinstance(value, str):
            return value
        return self._parse(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self.disabled:
            return initial
        if data is None:
            return None
        try:
            return self._parse(data)
        except ValidationError:
            return forms.fields.InvalidJSONInput(data)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        if value is None:
            return ""
        try:
            return json.dumps(value, indent=2, ensure_ascii=False, cls=self.encoder)
        except (ValueError, RecursionError):
            return "null"


PRETTY_JSON_OVERRIDES: dict[type[models.Field], dict[str, Any]] = {
    models.JSONField: {"form_class": PrettyJSONFormField},
}


class ReadOnlyAdminMixin:
    """For the durable record (runs, events, reports, decisions): visible, never added, edited
    or deleted by hand. A correction is a new decision on the review desk."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
