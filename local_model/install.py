"""`local_model install`: the model and the server, each skipped when it is already installed
and verified, so that a second install is a no-op and one interrupted resumes."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields

from local_model.build import ServerBuild
from local_model.fetch import ModelFetch
from local_model.spec import MODEL, ModelSpec
from local_model.steps import GB, Step


@dataclass
class Installer(Step):
    """Installs the server and the model under `paths`; see the package's docstring."""

    spec: ModelSpec = MODEL
    build_jobs: int = field(default_factory=lambda: os.cpu_count() or 2)
    # Room the server build needs (sources, objects, uv's cache), beyond the model's.
    build_space: int = 2 * GB

    def install(self, *, verify: bool = False) -> bool:
        """Install what is missing; True when anything was done (False: a no-op)."""
        self.paths.root.mkdir(parents=True, exist_ok=True)
        did_model = self.install_model(verify=verify)
        did_server = self.install_server()
        if self.paths.work_dir.is_dir() and not any(self.paths.work_dir.iterdir()):
            self.paths.work_dir.rmdir()
        return did_server or did_model

    def install_model(self, *, verify: bool = False) -> bool:
        return ModelFetch(**self._step(), spec=self.spec).install(verify=verify)

    def install_server(self) -> bool:
        return ServerBuild(
            **self._step(), build_jobs=self.build_jobs, build_space=self.build_space
        ).install()

    def _step(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(Step)}
