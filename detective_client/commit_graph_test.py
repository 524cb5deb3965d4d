"""The commit-graph written beside a checkout: used by git, the checkout left as it was."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from detective_client.commit_graph import graph_environment
from detective_client.hunks import blame_at_head


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "config", "user.name", "Mira Holt")
    _git(tmp_path, "config", "user.email", "mira@example.org")
    for number in range(12):
        for path in range(10):
            target = tmp_path / f"src/m{path}.py"
            target.parent.mkdir(exist_ok=True)
            lines = target.read_text().splitlines() if target.exists() else []
            lines.insert(number % (len(lines) + 1), f"value_{number} = {path}")
            target.write_text("\n".join(lines) + "\n")
        _git(tmp_path, "add", "-A")
        _git(tmp_path, "commit", "-q", "-m", f"change {number}")
        if number == 2:
            _git(tmp_path, "tag", "v1")
    return tmp_path


def _objects_info(repo: Path) -> list[str]:
    return sorted(p.name for p in (repo / ".git/objects/info").iterdir())


def test_the_graph_is_written_outside_the_checkout_and_git_reads_it(repo: Path) -> None:
    before = _objects_info(repo)
    head = _git(repo, "rev-parse", "HEAD")
    with graph_environment(repo, head) as env:
        assert env, "no graph written for a plain checkout"
        own = Path(env["GIT_OBJECT_DIRECTORY"])
        assert (own / "info/commit-graph").is_file()
        assert not own.is_relative_to(repo)
        # git reads the graph and still finds every object through the alternates.
        _git(repo, "commit-graph", "verify", env=env)
        assert _git(repo, "log", "-1", "--format=%s", env=env) == "change 11"
    assert not own.exists()
    assert _objects_info(repo) == before


def test_no_graph_when_the_checkout_has_one(repo: Path) -> None:
    _git(repo, "commit-graph", "write", "--reachable")
    with graph_environment(repo, _git(repo, "rev-parse", "HEAD")) as env:
        assert env == {}


def test_blame_is_the_same_with_and_without_the_graph(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [f"src/m{n}.py" for n in range(10)]
    with_graph = blame_at_head(repo, "v1..HEAD", paths)
    # Fewer paths than the threshold: no graph.
    monkeypatch.setattr("detective_client.hunks._GRAPH_FROM", 1_000)
    without = blame_at_head(repo, "v1..HEAD", paths)
    assert with_graph == without
    assert {b.path for b in with_graph} == set(paths)
