"""An exception's group: the fingerprint Sentry-like grouping gives it, from the exception type
and the module and function of its in-app frames; never line numbers (a commit above the
function moves them) nor the numbers of its message (ids, amounts, counts differ per request).

The frames are read by the same reader as a failed test's text (`sources.parsers.tracebacks`:
Python, Java, node); a frame is in-app unless it lies in a library or the runtime.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from sources.parsers.tracebacks import Frame, read_frames

__all__ = ["Grouped", "group_of", "in_app", "module_of", "normalised_message"]

_LIBRARY = (
    "site-packages/",
    "dist-packages/",
    "/lib/python",
    "node_modules/",
    "internal/",
    "<frozen",
)
_NUMBERS = re.compile(
    r"0x[0-9a-f]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d+(?:\.\d+)?",
    re.IGNORECASE,
)
# A frame list past this is a recursion: its head says as much as all of it.
MAX_FRAMES = 50


@dataclass(frozen=True, slots=True)
class Grouped:
    fingerprint: str
    exception_type: str
    # The in-app frames, outermost call first.
    frames: tuple[Frame, ...]

    @property
    def culprit(self) -> Frame | None:
        """The innermost in-app frame: where the application last had a hand in it."""
        return self.frames[-1] if self.frames else None


def in_app(frame: Frame) -> bool:
    """The reader keeps a library's frame relative (its `site-packages/` prefix stripped) and
    outside the repository; a deployed service's own files are absolute paths outside any
    library directory."""
    if frame.in_repo:
        return True
    path = frame.path.replace("\\", "/")
    absolute = path.startswith("/") or re.match(r"^[A-Za-z]:/", path) is not None
    return absolute and not any(marker in path for marker in _LIBRARY)


def module_of(path: str) -> str:
    """A frame's module, the same whatever directory the service was deployed into: its file
    and the directory it sits in (`/srv/app/shop/pricing.py` -> `shop/pricing.py`)."""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    return "/".join(parts[-2:]) if parts else ""


def normalised_message(message: str) -> str:
    return _NUMBERS.sub("<n>", message.strip())[:200]


def group_of(exception_type: str, message: str, stacktrace: str) -> Grouped:
    frames = read_frames(stacktrace)[:MAX_FRAMES] if stacktrace else []
    # Python writes the outermost call first; Java and node the innermost.
    if frames and "Traceback (most recent call last)" not in stacktrace:
        frames = list(reversed(frames))
    mine = tuple(f for f in frames if in_app(f))
    kind = exception_type.strip() or "Exception"
    if mine:
        where = [f"{module_of(f.path)}:{f.function}" for f in mine]
    elif frames:
        where = [f"{module_of(f.path)}:{f.function}" for f in frames]
    else:
        where = [normalised_message(message)]
    digest = hashlib.sha256("\n".join([kind, *where]).encode("utf-8", "replace")).hexdigest()
    return Grouped(fingerprint=digest[:32], exception_type=kind, frames=mine)
