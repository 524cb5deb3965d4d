"""The URL converter for release versions in page addresses.

Versions follow one format now (releases/validation.py), but rows saved before it may hold a
"/" (the migration reports them, it does not rename them). Such a version must not break
every page that links to it (`reverse` raised NoReverseMatch, so the release list was a 500
for everyone): its "/" and "%" travel percent-encoded in the segment and are decoded back.
"""

from __future__ import annotations

from urllib.parse import unquote


class VersionConverter:
    regex = "[^/]+"

    def to_python(self, value: str) -> str:
        return unquote(value) if "%" in value else value

    def to_url(self, value: str) -> str:
        return value.replace("%", "%25").replace("/", "%2F")
