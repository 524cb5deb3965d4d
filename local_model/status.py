"""What `local_model status` says: installed or not (versions, sizes), running or not, healthy
or not."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from local_model.paths import LocalModelPaths, model_installed, read_manifest, server_installed
from local_model.serve import RunningServer, health, running_server
from local_model.spec import INSTALL_HINT, MODEL, SERVER_PACKAGE, SERVER_VERSION
from local_model.steps import GB


def server_version(paths: LocalModelPaths) -> str | None:
    """What `llama-server --version` says (the llama.cpp build), or None."""
    if not paths.binary.is_file():
        return None
    try:
        result = subprocess.run(
            [str(paths.binary), "--version"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    for line in (result.stdout + result.stderr).splitlines():
        if line.startswith("version:"):
            return line.removeprefix("version:").strip()
    return None


@dataclass(frozen=True)
class Status:
    root: Path
    server_installed: bool
    server_version: str | None
    llama_cpp_commit: str | None
    model_installed: bool
    model_path: Path
    model_size: int | None
    running: RunningServer | None
    health: str  # ok, loading, down

    def lines(self) -> Iterator[str]:
        yield f"Directory: {self.root}"
        if self.server_installed:
            build = f"; llama-server {self.server_version}" if self.server_version else ""
            yield f"Server:    installed ({SERVER_PACKAGE} {SERVER_VERSION}{build})"
        else:
            yield f"Server:    not installed (run `{INSTALL_HINT}`)"
        if self.model_installed:
            yield (
                f"Model:     installed and verified, {MODEL.alias} "
                f"({(self.model_size or 0) / GB:.2f} GB, {self.model_path})"
            )
        elif self.model_size is not None:
            yield f"Model:     present but not verified (run `{INSTALL_HINT}`)"
        else:
            yield f"Model:     not installed (run `{INSTALL_HINT}`)"
        if self.running:
            yield (
                f"Running:   pid {self.running.pid} at {self.running.url} since "
                f"{self.running.started_at}; health: {self.health}"
            )
        else:
            yield "Running:   no (`uv run manage.py local_model serve` starts it)"


def status(paths: LocalModelPaths) -> Status:
    model = paths.model()
    server = running_server(paths)
    manifest = read_manifest(paths).get("server") or {}
    installed = server_installed(paths)
    return Status(
        root=paths.root,
        server_installed=installed,
        server_version=server_version(paths) if installed else None,
        llama_cpp_commit=manifest.get("llama_cpp_commit"),
        model_installed=model_installed(paths),
        model_path=model,
        model_size=model.stat().st_size if model.is_file() else None,
        running=server,
        health=health(server.port) if server else "down",
    )
