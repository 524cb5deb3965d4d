"""Reads of the sources app."""

from __future__ import annotations

import hashlib

from releases.token_hooks import TokenScope
from sources.models import IngestionToken


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_for(token: str) -> IngestionToken | None:
    """The live ingestion token whose SHA-256 this is, or None."""
    if not token or len(token) > 200:
        return None
    return (
        IngestionToken.objects.select_related("service")
        .filter(token_hash=hash_token(token), revoked=False)
        .first()
    )


def token_scope(token: str) -> TokenScope | None:
    """An ingestion token's scope for releases' verdict API (releases/token_hooks.py)."""
    found = token_for(token)
    if found is None:
        return None
    return TokenScope(
        name=found.name,
        service_id=found.service_id,
        service_name=found.service.name if found.service is not None else "",
    )
