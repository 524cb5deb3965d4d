"""The webhook signature: HMAC-SHA256 over `<timestamp>.<body>` with the endpoint's secret, in
the header `Detective-Signature: t=<unix seconds>,v1=<hex digest>`.

A receiver recomputes the digest over the timestamp it was given and the raw body, compares in
constant time, and refuses a timestamp too far from its clock (a replayed delivery). `verify`
is that check, for receivers written in Python and for the tests.
"""

from __future__ import annotations

import hashlib
import hmac
import time

HEADER = "Detective-Signature"
TOLERANCE_S = 300


class BadSignature(ValueError):
    pass


def digest(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The header's value for `body`, signed now (or at `timestamp`)."""
    when = int(time.time()) if timestamp is None else timestamp
    return f"t={when},v1={digest(secret, when, body)}"


def verify(
    header: str, secret: str, body: bytes, *, now: float | None = None, tolerance: int = TOLERANCE_S
) -> int:
    """The signed timestamp when `header` signs `body` with `secret` recently enough; else
    `BadSignature` saying why."""
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        fields.setdefault(key, []).append(value)
    try:
        timestamp = int(fields["t"][0])
    except (KeyError, ValueError):
        raise BadSignature("no timestamp (t=) in the signature") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise BadSignature(f"the timestamp is more than {tolerance} s from now")
    expected = digest(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, given) for given in fields.get("v1", [])):
        raise BadSignature("no v1= signature matches the body")
    return timestamp
