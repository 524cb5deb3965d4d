"""The validation layer: bodies, text and versions it refuses, and what it lets through."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from releases import validation
from releases.validation import BodyError, parse_json_body


def test_a_plain_body_parses() -> None:
    body = b'{"a": [1, 2.5, "x\\u00e9", {"b": null}], "c": true}'
    assert parse_json_body(body) == {"a": [1, 2.5, "x\u00e9", {"b": None}], "c": True}


def test_depth_is_counted_outside_strings_only() -> None:
    brackets_in_text = '{"a": "' + "[" * 100 + '"}'
    assert parse_json_body(brackets_in_text.encode()) == {"a": "[" * 100}
    escaped_quote = '{"a": "\\"[[[[[[[[[[[[[[[[[[[[[[[[[[["}'
    assert parse_json_body(escaped_quote.encode())["a"].startswith('"[')


def test_the_depth_limit_is_exact() -> None:
    assert parse_json_body(b"[" * 20 + b"]" * 20) is not None
    with pytest.raises(BodyError, match="deeper than 20"):
        parse_json_body(b"[" * 21 + b"]" * 21)


def test_a_body_deep_enough_to_crash_the_parser_is_refused_not_raised() -> None:
    with pytest.raises(BodyError):
        parse_json_body(b"[" * 50_000 + b"]" * 50_000, max_bytes=10**6)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"a": {"k": 1, "k": 2}}', "'k' appears more than once"),
        (b'{"a\\u0000": 1}', "a key in body contains a NUL"),
        (b'{"a": ["ok", {"b": "\\udc00"}]}', "a[1].b contains a lone surrogate"),
        (b"Infinity", "Infinity is not a JSON value"),
        (b"{", "not valid JSON"),
        (b"   ", "empty"),
    ],
)
def test_refused_bodies_say_why(body: bytes, message: str) -> None:
    with pytest.raises(BodyError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_json_body(body)


def test_the_size_limit() -> None:
    with pytest.raises(BodyError, match="larger than 10 bytes"):
        parse_json_body(b'["0123456789"]', max_bytes=10)


@pytest.mark.parametrize(
    "version", ["v2.1.0", "1.0.0-rc.1+build.5", "release_2026_11", "A" * 64, "v1"]
)
def test_valid_versions(version: str) -> None:
    assert validation.is_valid_version(version)
    validation.validate_version(version)


@pytest.mark.parametrize(
    "version",
    [
        *["", "v1/2", "v1 2", "<script>alert(1)</script>", "a" * 65, "v1\x00", "v1\n", "é1"],
        *[".", "..", "-rf", ".hidden", "a" * 500],
    ],
)
def test_invalid_versions(version: str) -> None:
    assert not validation.is_valid_version(version)
    with pytest.raises(ValidationError):
        validation.validate_version(version)


def test_text_problems() -> None:
    assert validation.text_problem("fine é ✓") is None
    assert validation.text_problem("a\x00") == "contains a NUL character"
    assert "surrogate" in (validation.text_problem("a\ud800") or "")
    with pytest.raises(ValueError, match="NUL"):
        validation.check_text("\x00")


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("x" * 101, "is longer than 100 characters (101)"),
        ("x" * 500, "is longer than 100 characters (500)"),
        (".", "cannot be '.'"),
        ("..", "cannot be '..'"),
        ("-shop", 'cannot start with "-"'),
        ("  ", "is empty"),
        ("sh\x00op", "contains a NUL character"),
    ],
)
def test_service_names_refused(name: str, problem: str) -> None:
    assert validation.service_name_problem(name) == problem
    with pytest.raises(ValidationError, match="A service name"):
        validation.validate_service_name(name)


@pytest.mark.parametrize("name", ["Shop", "x" * 100, "billing-eu", "v2.shop", "Café"])
def test_service_names_kept(name: str) -> None:
    assert validation.service_name_problem(name) is None
