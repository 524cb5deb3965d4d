"""The whole install, twice."""

from __future__ import annotations

from local_model.paths import LocalModelPaths, is_installed
from local_model.testing import FakeUv, fake_spec, installer


def test_install_does_both_and_then_nothing(paths: LocalModelPaths) -> None:
    uv = FakeUv()
    assert installer(paths, uv).install() is True
    assert is_installed(paths, fake_spec())
    assert not paths.work_dir.exists()

    again = FakeUv()
    assert installer(paths, again).install() is False
    assert again.calls == []
