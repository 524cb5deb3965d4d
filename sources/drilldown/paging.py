"""Paging of the drill-downs: a page's bounds from the query string, and the page's frame."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_OFFSET = 1_000_000
MAX_FILTER_CHARS = 200


class QueryError(ValueError):
    """A query parameter that cannot be read; the message says which and why."""


@dataclass(frozen=True, slots=True)
class PageBounds:
    limit: int
    offset: int

    @classmethod
    def of(cls, query: Mapping[str, str], default_limit: int = DEFAULT_LIMIT) -> PageBounds:
        """The page asked for; a limit over MAX_LIMIT is capped (the answer says so)."""
        limit = _whole(query, "limit", default_limit, minimum=1)
        offset = _whole(query, "offset", 0, minimum=0)
        return cls(limit=min(limit, MAX_LIMIT), offset=min(offset, MAX_OFFSET))

    def frame(self, total: int, items: list[Any]) -> dict[str, Any]:
        """What every page carries beside its items: where it is, and where the next starts."""
        following = self.offset + len(items)
        return {
            "total": total,
            "offset": self.offset,
            "limit": self.limit,
            "max_limit": MAX_LIMIT,
            "returned": len(items),
            "next_offset": following if following < total else None,
        }


def text_filter(query: Mapping[str, str], name: str) -> str:
    value = query.get(name, "").strip()
    if len(value) > MAX_FILTER_CHARS:
        raise QueryError(f"{name} is longer than {MAX_FILTER_CHARS} characters")
    return value


def choice(query: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
    value = query.get(name, "").strip().lower()
    if value and value not in allowed:
        raise QueryError(f"{name} must be one of {', '.join(allowed)} (or absent), not {value!r}")
    return value


def _whole(query: Mapping[str, str], name: str, default: int, *, minimum: int) -> int:
    raw = query.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise QueryError(f"{name} must be a whole number, not {raw[:20]!r}") from None
    if value < minimum:
        raise QueryError(f"{name} must be at least {minimum}")
    return value
