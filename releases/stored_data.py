"""Reading release data whatever an old row holds.

The model's validation keeps bad values out (`releases.schemas`), but rows written before it,
or by hand in the database, may hold anything JSON can spell: a number of 400 digits, 1e999,
NaN, text with a lone surrogate or a NUL, nesting thousands of levels deep. Pages, the API and
the risk policy read the data through `StoredJSONDecoder`, which turns what they could not
read into None: it counts as missing (the policy says "missing", pages say "missing") instead
of raising OverflowError or UnicodeEncodeError in the middle of a page. Text with a lone
surrogate or a NUL keeps its readable part, the bad characters shown as U+FFFD.

Each distinct unreadable value is logged once per process, as a warning naming the problem.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from typing import Any

from releases.schemas import MAX_DEPTH, number_problem
from releases.validation import text_problem

logger = logging.getLogger(__name__)

REPLACEMENT = "\ufffd"
_BAD_CHARACTERS = re.compile("[\x00\ud800-\udfff]")
_warned: set[str] = set()


def _warn_once(problem: str, raw: str) -> None:
    key = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()
    if key in _warned:
        return
    _warned.add(key)
    logger.warning(
        "A stored release value cannot be read (%s); it counts as missing. "
        "`manage.py migrate` lists the rows that break the rules.",
        problem,
    )


def readable_text(value: str) -> str:
    """The text with NUL characters and lone surrogates replaced by U+FFFD."""
    if text_problem(value) is None:
        return value
    # A Python string holds a valid pair as one code point: any surrogate left is a lone one.
    return _BAD_CHARACTERS.sub(REPLACEMENT, value)


def readable(value: Any, depth: int = 0) -> tuple[Any, str | None]:
    """(the value with what cannot be read replaced, the first problem met or None)."""
    if value is None or isinstance(value, bool):
        return value, None
    if isinstance(value, int | float):
        problem = number_problem(value)
        return (None, f"a number {problem}") if problem else (value, None)
    if isinstance(value, str):
        repaired = readable_text(value)
        return repaired, None if repaired is value else "text with a NUL or a lone surrogate"
    if depth >= MAX_DEPTH:
        return None, f"a value nested deeper than {MAX_DEPTH} levels"
    first: str | None = None
    if isinstance(value, list):
        items = []
        for item in value:
            clean, problem = readable(item, depth + 1)
            items.append(clean)
            first = first or problem
        return items, first
    if isinstance(value, dict):
        mapping = {}
        for key, item in value.items():
            clean, problem = readable(item, depth + 1)
            mapping[readable_text(str(key))] = clean
            first = first or problem
        return mapping, first
    return None, f"a {type(value).__name__}"


class StoredJSONDecoder(json.JSONDecoder):
    """The JSON decoder of the release data fields: never raises, see the module's doc. A
    value of another type than the field's (`shape`) counts as missing too."""

    shape: type | None = None

    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        try:
            value = super().decode(s, *args, **kwargs)
        except RecursionError:
            _warn_once("nested too deep to read", s)
            return None
        except ValueError as error:
            # Not JSON at all, or an integer of more digits than Python converts (4,300).
            _warn_once(str(error)[:120], s)
            return None
        if self.shape is not None and value is not None and not isinstance(value, self.shape):
            _warn_once(f"a {type(value).__name__} where a {self.shape.__name__} belongs", s)
            return None
        clean, problem = readable(value)
        if problem:
            _warn_once(problem, s)
        return clean


class StoredListDecoder(StoredJSONDecoder):
    shape = list


class StoredObjectDecoder(StoredJSONDecoder):
    shape = dict


def finite(value: Any) -> Any:
    """The JSON value with every NaN and infinity replaced by None (missing): what an event's
    payload is saved as, since JSON (and the database's JSON check) has neither."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [finite(item) for item in value]
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    return value
