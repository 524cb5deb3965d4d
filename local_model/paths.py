"""Where the local model lives under the data directory, and the manifest of what is installed
and verified (the layout is in the package's docstring)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from local_model.spec import MODEL, SERVER_BINARY, SERVER_VERSION, ModelSpec


@dataclass(frozen=True)
class LocalModelPaths:
    root: Path

    @classmethod
    def for_data_dir(cls, data_dir: Path) -> LocalModelPaths:
        return cls(Path(data_dir) / "local-model")

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def binary(self) -> Path:
        return self.bin_dir / SERVER_BINARY

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    def model(self, spec: ModelSpec = MODEL) -> Path:
        return self.models_dir / spec.file_name

    @property
    def manifest(self) -> Path:
        return self.root / "installed.json"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def build_log(self) -> Path:
        return self.logs_dir / "build.log"

    @property
    def server_log(self) -> Path:
        return self.logs_dir / "server.log"

    @property
    def pid_file(self) -> Path:
        return self.root / "server.json"

    @property
    def work_dir(self) -> Path:
        return self.root / "work"

    @property
    def server_packages(self) -> Path:
        return self.work_dir / "server-packages"

    @property
    def parts_dir(self) -> Path:
        return self.work_dir / "parts"


# ---- the manifest: what is installed and verified ----------------------------------------------


def read_manifest(paths: LocalModelPaths) -> dict[str, Any]:
    try:
        data = json.loads(paths.manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)


def update_manifest(paths: LocalModelPaths, key: str, entry: Mapping[str, Any]) -> None:
    manifest = read_manifest(paths)
    manifest[key] = dict(entry)
    write_json(paths.manifest, manifest)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def server_installed(paths: LocalModelPaths) -> bool:
    entry = read_manifest(paths).get("server") or {}
    return (
        entry.get("version") == SERVER_VERSION
        and paths.binary.is_file()
        and os.access(paths.binary, os.X_OK)
    )


def model_installed(paths: LocalModelPaths, spec: ModelSpec = MODEL) -> bool:
    """The model file is the one that was verified: same checksum pinned, same size and
    modification time as when it was hashed (re-hashing 1.1 GB on every start is too slow)."""
    entry = read_manifest(paths).get("model") or {}
    path = paths.model(spec)
    try:
        stat = path.stat()
    except OSError:
        return False
    return (
        entry.get("file") == spec.file_name
        and entry.get("sha256") == spec.sha256
        and entry.get("size") == stat.st_size == spec.size
        and entry.get("mtime_ns") == stat.st_mtime_ns
    )


def is_installed(paths: LocalModelPaths, spec: ModelSpec = MODEL) -> bool:
    return server_installed(paths) and model_installed(paths, spec)
