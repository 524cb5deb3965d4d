"""What the install's steps share: running a command into a log, telling the person waiting
how far it is, and making sure the disk has room."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from local_model.paths import LocalModelPaths
from local_model.spec import INSTALL_HINT, InstallError

GB = 1000**3


class CommandRunner(Protocol):
    def __call__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log: Path,
        on_line: Callable[[str], None] | None = None,
    ) -> int:
        """Run `argv`, appending its output to `log` line by line; return its exit code."""
        ...


def run_logged(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log: Path,
    on_line: Callable[[str], None] | None = None,
) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8", errors="replace") as output:
        output.write(f"\n$ {' '.join(argv)}\n")
        output.flush()
        with subprocess.Popen(
            list(argv),
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        ) as process:
            assert process.stdout is not None
            for line in process.stdout:
                output.write(line)
                if on_line:
                    on_line(line)
            return process.wait()


def find_uv() -> str:
    """The uv running us (`uv run` exports its path as UV), else the one on PATH."""
    candidate = os.environ.get("UV") or shutil.which("uv")
    if not candidate:
        raise InstallError(
            "uv was not found. Install it (https://docs.astral.sh/uv/) and run "
            f"`{INSTALL_HINT}` again."
        )
    return candidate


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# ---- progress -----------------------------------------------------------------------------------


class Progress(Protocol):
    """What the installer tells the person waiting (rich in the command, a list in tests)."""

    def step(self, message: str) -> None: ...

    def done(self, message: str) -> None: ...

    def task(self, description: str, total: float | None) -> Callable[[float], None]:
        """Start a progress bar; the returned function sets how far it is (absolute)."""
        ...

    def end_task(self) -> None: ...


class SilentProgress:
    def step(self, message: str) -> None:
        pass

    def done(self, message: str) -> None:
        pass

    def task(self, description: str, total: float | None) -> Callable[[float], None]:
        return lambda completed: None

    def end_task(self) -> None:
        pass


def free_bytes(path: Path) -> int:
    existing = path
    while not existing.exists():
        existing = existing.parent
    return shutil.disk_usage(existing).free


@dataclass
class Step:
    """An install step: where it installs, how it reports and runs commands."""

    paths: LocalModelPaths
    progress: Progress = field(default_factory=SilentProgress)
    run: CommandRunner = run_logged
    uv: str | None = None
    python: str = sys.executable
    free_space: Callable[[Path], int] = free_bytes

    def _check_space(self, needed: int, purpose: str) -> None:
        available = self.free_space(self.paths.root)
        if available < needed:
            raise InstallError(
                f"Not enough disk space to install {purpose}: it needs about "
                f"{needed / GB:.1f} GB free in {self.paths.root}, and {available / GB:.1f} GB "
                "are. Free some space, or point DETECTIVE_DATA_DIR at a larger disk, and run "
                f"`{INSTALL_HINT}` again."
            )
