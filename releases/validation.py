"""One validation layer for what enters the site from outside: JSON bodies, text, versions.

Everything here refuses rather than repairs: a body that is too large, too deep, has a key twice,
or carries a NUL byte or a lone surrogate is an error the caller sees (400), never something
the database or the encoder trips over later (500). PostgreSQL refuses NUL in text, and no
UTF-8 encoder takes a lone surrogate, so both must stop at the door.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

MAX_BODY_BYTES = 64 * 1024
MAX_DEPTH = 20

# Release versions: letters, digits, ".", "-", "_", "+"; no "/" (it would break the release
# URLs), no spaces, no markup; at most 64 characters (the column's length). Not starting with
# "." (".." made a page link that opened the home page) nor "-" (read as an option by tools).
VERSION_MAX_LENGTH = 64
VERSION_PATTERN = r"[A-Za-z0-9_+][A-Za-z0-9._+-]{0,63}"
VERSION_FORMAT = (
    'letters, digits, ".", "-", "_" and "+" only, not starting with "." or "-", 1 to 64 characters'
)
_VERSION_RE = re.compile(rf"\A{VERSION_PATTERN}\Z")

validate_version = RegexValidator(
    regex=rf"\A{VERSION_PATTERN}\Z",
    message=f"A release version may contain {VERSION_FORMAT}.",
    code="invalid_version",
)


def is_valid_version(value: object) -> bool:
    return isinstance(value, str) and bool(_VERSION_RE.match(value))


# Service names: the column's length, text a database can store, and not ".", ".." or a
# leading "-" (a service's slug is part of its pages' paths and of command lines).
SERVICE_NAME_MAX_LENGTH = 100


def service_name_problem(value: str) -> str | None:
    """Why this cannot name a service, or None when it can."""
    if not value.strip():
        return "is empty"
    if len(value) > SERVICE_NAME_MAX_LENGTH:
        return f"is longer than {SERVICE_NAME_MAX_LENGTH} characters ({len(value)})"
    if value.strip() in (".", ".."):
        return f"cannot be {value.strip()!r}"
    if value.lstrip().startswith("-"):
        return 'cannot start with "-"'
    if not BIDI_CONTROLS.isdisjoint(value):
        return "contains a text direction control (U+202A..U+202E, U+2066..U+2069)"
    return text_problem(value)


# Text direction overrides and isolates (Trojan Source): a name with one reads as another.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def validate_service_name(value: str) -> None:
    """Django validator for a service's name (see service_name_problem)."""
    if isinstance(value, str) and (problem := service_name_problem(value)):
        raise ValidationError(f"A service name {problem}.", code="invalid_service_name")


class BodyError(ValueError):
    """The body cannot be accepted; the message says why, in words a caller can act on."""


def text_problem(value: str) -> str | None:
    """Why this text cannot be stored (a NUL byte, a lone surrogate), or None when it can."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (invalid Unicode)"
    return None


def check_text(value: str) -> str:
    """For pydantic's AfterValidator: the value itself, or a ValueError saying what is wrong."""
    if problem := text_problem(value):
        raise ValueError(problem)
    return value


def _depth(raw: str) -> int:
    """The deepest nesting of arrays and objects, counted without parsing (the parser would
    recurse, and a deep enough body makes it raise RecursionError)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise BodyError(f"the key {key!r} appears more than once")
        seen[key] = value
    return seen


def _check_strings(value: Any, where: str = "body") -> None:
    if isinstance(value, str):
        if problem := text_problem(value):
            raise BodyError(f"{where} {problem}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_strings(item, f"{where}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            if problem := text_problem(key):
                raise BodyError(f"a key in {where} {problem}")
            _check_strings(item, f"{where}.{key}" if where != "body" else key)


def parse_json_body(
    body: bytes, *, max_bytes: int = MAX_BODY_BYTES, max_depth: int = MAX_DEPTH
) -> Any:
    """The JSON value of a request body, or BodyError.

    Refused: more than `max_bytes`, not UTF-8, not JSON, nested deeper than `max_depth`, a key
    twice in one object (which of the two would count is a guess), NUL characters and lone
    surrogates in any string or key, and NaN/Infinity (not JSON).
    """
    if len(body) > max_bytes:
        raise BodyError(f"the body is larger than {max_bytes:,} bytes")
    try:
        raw = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyError("the body is not UTF-8") from None
    if not raw.strip():
        raise BodyError("the body is empty; send a JSON object")
    if _depth(raw) > max_depth:
        raise BodyError(f"the body is nested deeper than {max_depth} levels")
    try:
        value = json.loads(raw, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)
    except BodyError:
        raise
    except (ValueError, RecursionError):
        raise BodyError("the body is not valid JSON") from None
    _check_strings(value)
    return value


def _refuse_constant(name: str) -> Any:
    raise BodyError(f"{name} is not a JSON value")


def validate_plain_text(value: str) -> None:
    """Django validator: text the database can store as it is (no NUL, no lone surrogate)."""
    if isinstance(value, str) and (problem := text_problem(value)):
        raise ValidationError(f"The text {problem}.", code="invalid_text")
