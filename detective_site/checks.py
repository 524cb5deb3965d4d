"""The site's own system checks (`manage.py check --deploy`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register

WILDCARD_HOSTS = "detective.W001"


@register(Tags.security, deploy=True)
def wildcard_allowed_hosts(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """ALLOWED_HOSTS=* accepts any Host header: password-reset links, absolute URLs and the
    websocket origin check then trust whatever a client sends."""
    if "*" not in settings.ALLOWED_HOSTS:
        return []
    return [
        Warning(
            "ALLOWED_HOSTS contains '*': any Host header is accepted, and the origin check of "
            "the websockets accepts any origin.",
            hint="Set ALLOWED_HOSTS to the site's host names, e.g. detective.example.com.",
            id=WILDCARD_HOSTS,
        )
    ]
