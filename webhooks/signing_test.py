from __future__ import annotations

import hashlib
import hmac

import pytest

from webhooks.signing import BadSignature, sign, verify

BODY = b'{"version": "1.4.0", "severity": "high"}'


def test_the_signature_is_hmac_sha256_over_timestamp_dot_body() -> None:
    header = sign("s3cret", BODY, timestamp=1_700_000_000)
    expected = hmac.new(b"s3cret", b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"
    assert verify(header, "s3cret", BODY, now=1_700_000_010) == 1_700_000_000


@pytest.mark.parametrize(
    ("secret", "body", "now", "reason"),
    [
        ("other", BODY, 1_700_000_000, "no v1= signature matches"),
        ("s3cret", BODY + b" ", 1_700_000_000, "no v1= signature matches"),
        ("s3cret", BODY, 1_700_000_301, "more than 300 s from now"),
        ("s3cret", BODY, 1_699_999_000, "more than 300 s from now"),
    ],
)
def test_a_wrong_secret_body_or_an_old_timestamp_is_refused(
    secret: str, body: bytes, now: int, reason: str
) -> None:
    header = sign("s3cret", BODY, timestamp=1_700_000_000)
    with pytest.raises(BadSignature, match=reason):
        verify(header, secret, body, now=now)


def test_a_header_without_a_timestamp_is_refused() -> None:
    with pytest.raises(BadSignature, match="no timestamp"):
        verify("v1=abc", "s3cret", BODY)
