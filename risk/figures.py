"""Figures as written in text, and whether they match numbers in the data.

A figure is read with its unit: `5%`, `5.0 %`, `5 percent` and `0.05` are the same value
(`3 percentage points` and `3 pp` read as 3 %); `450ms`, `450 ms` and `0.45s` too. It matches a
number when they agree to the figure's own precision (`5.2%` matches 0.0523; `5%` matches
0.049). Not figures: version strings (`v2.1.0`, `2.1.0`), and digits glued to letters,
underscores, `#`, `/` or a letter-hyphen (`p95`, `test_auth_2fa`, `OAuth2`, `PAY-123`, `#42`,
`3x`), and digits in a parametrized test's id (`test_int_bytes[192-\\xc0]`).

Used by the grounding of filed reports (`risk/grounding.py`) and by the evals.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_VERSION_RE = re.compile(r"(?<![\w.])v?\d+(?:\.\d+){2,}\b|(?<![\w.])v\d+(?:\.\d+)?\b", re.I)
# A test's id with its parameters ("test_int_bytes[192-\\xc0]"): the digits inside are part of
# the name, not figures (measured on pallets/itsdangerous: "192 is not one of the release's test
# counts").
_TEST_ID_RE = re.compile(r"[\w.:/\\-]*\w\[[^\]\n]{0,300}\]")
_FIGURE_RE = re.compile(
    r"(?<![\w.#/])(?<![A-Za-z]-)"
    r"(?>(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?)"
    r"(?:\s?(?P<unit>%|per\s?cent\b|percentage\s+points?\b|pp\b|ms\b|milliseconds?\b"
    r"|seconds?\b|secs?\b|s\b))?"
    r"(?!\w|\.\d)",
    re.I,
)


@dataclass(frozen=True, slots=True)
class Figure:
    """A number as written in a text, with its unit ("", "%", "ms" or "s")."""

    text: str
    value: float
    unit: str
    decimals: int
    start: int = 0

    def readings(self) -> list[tuple[float, float]]:
        """The values this figure can denote, each with its rounding tolerance."""
        tol = 0.5 * 10 ** (-self.decimals) + 1e-9
        v = self.value
        if self.unit == "%":
            return [(v / 100, tol / 100), (v, tol)]
        if self.unit == "ms":
            return [(v, tol), (v / 1000, tol / 1000)]
        if self.unit == "s":
            return [(v, tol), (v * 1000, tol * 1000)]
        return [(v, tol)]

    def matches(self, known: Iterable[float]) -> bool:
        known = list(known)
        return any(
            abs(value - k) <= tol + 1e-9 * max(1.0, abs(k))
            for value, tol in self.readings()
            for k in known
        )


def _unit(raw: str | None) -> str:
    if not raw:
        return ""
    raw = raw.lower().replace(" ", "")
    if raw in ("%", "pp") or raw.startswith("per"):
        return "%"
    if raw.startswith(("ms", "milli")):
        return "ms"
    return "s"


def extract_figures(text: str) -> list[Figure]:
    """Every number in `text` that is a figure (see the module docstring, rule 3)."""
    blank = lambda m: " " * len(m.group(0))  # noqa: E731 (keeps every figure's offset)
    cleaned = _VERSION_RE.sub(blank, _TEST_ID_RE.sub(blank, text))
    figures: list[Figure] = []
    for m in _FIGURE_RE.finditer(cleaned):
        digits = m.group("int").replace(",", "")
        frac = m.group("frac") or ""
        figures.append(
            Figure(
                text=m.group(0).strip(),
                value=float(digits + frac),
                unit=_unit(m.group("unit")),
                decimals=max(0, len(frac) - 1),
                start=m.start(),
            )
        )
    return figures


def numbers_in(value: Any) -> list[float]:
    """Numeric leaves of JSON-like data, and the figures inside its strings."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, str):
        return [r for f in extract_figures(value) for r, _ in f.readings()]
    if isinstance(value, Mapping):
        return [n for v in value.values() for n in numbers_in(v)]
    if isinstance(value, list | tuple):
        return [n for v in value for n in numbers_in(v)]
    return []
