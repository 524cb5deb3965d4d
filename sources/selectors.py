"""Reads of the sources app."""

from __future__ import annotations

import hashlib

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
