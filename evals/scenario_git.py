"""A scenario's git history: its `git format-patch` files replayed into a repository.

A scenario made of a git history keeps, per release, a folder of patches as `git format-patch`
writes them (author, date, message and the real diff of each commit). `build` replays them with
`git am` into a new repository, release after release, and tags each release's last commit with
its version, so the ingestion reads a real range (`v1.4.0..v1.5.0`) with `git log` and `git
blame` as `manage.py ingest --git-repo` does, and ranks the failures' suspect commits.

The repository is the same every time: the committer is fixed and dated as the author
(`--committer-date-is-author-date`), so every commit keeps its sha from one build to the next
and from one machine to another; a short sha in a scenario or a report means the same commit.

To change a history: `uv run python -m evals.scenario_git evals/scenarios/files/<id> /tmp/repo`
replays it, commit there as usual, and write the release's folder again with
`git -C /tmp/repo format-patch -N --zero-commit --no-signature -o <folder> <previous tag>..<tag>`
(for the first release, `--root <tag>`). Then bump the suite's version.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

COMMITTER_NAME = "Detective evals"
COMMITTER_EMAIL = "evals@detective.invalid"
_TIMEOUT_S = 120


class HistoryError(ValueError):
    """The patches could not be replayed; the message names the release and git's reason."""


class ReleaseHistory(Protocol):
    """What `build` needs of a release (evals.scenario.SourceRelease has it)."""

    @property
    def version(self) -> str: ...

    @property
    def history(self) -> str | None: ...


def _git(repo: Path, *args: str) -> str:
    environment = {
        **os.environ,
        "LC_ALL": "C",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_COMMITTER_NAME": COMMITTER_NAME,
        "GIT_COMMITTER_EMAIL": COMMITTER_EMAIL,
        # A user's or CI's config (signing, hooks, a default branch) must not change the shas.
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            env=environment,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise HistoryError("the git command is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise HistoryError(f"git {args[0]} did not finish within {_TIMEOUT_S} s") from None
    if done.returncode != 0:
        raise HistoryError(done.stderr.strip() or f"git {args[0]} failed")
    return done.stdout


def build(directory: Path, releases: Sequence[ReleaseHistory], into: Path) -> dict[str, str]:
    """Replay each release's patches (`directory / release.history / *.patch`, in name order)
    into a new repository at `into` (an empty or missing folder), tag each release with its
    version, and return each version's range (`previous..version`; the first: its tag alone)."""
    into.mkdir(parents=True, exist_ok=True)
    _git(into, "init", "--quiet", "--initial-branch=main")
    ranges: dict[str, str] = {}
    previous: str | None = None
    for release in releases:
        if release.history is None:
            raise HistoryError(f"release {release.version}: no history folder")
        patches = sorted((directory / release.history).glob("*.patch"))
        if not patches:
            raise HistoryError(f"release {release.version}: no patch in {release.history}/")
        try:
            _git(
                into,
                "am",
                "--quiet",
                "--committer-date-is-author-date",
                "--keep-non-patch",
                *(str(p) for p in patches),
            )
        except HistoryError as exc:
            raise HistoryError(f"release {release.version}: git am: {exc}") from None
        _git(into, "tag", release.version)
        ranges[release.version] = (
            release.version if previous is None else f"{previous}..{release.version}"
        )
        previous = release.version
    return ranges


def main(argv: Sequence[str] | None = None) -> None:
    from evals.scenario import load_suite

    parser = argparse.ArgumentParser(description="Replay a scenario's git history.")
    parser.add_argument("scenario", help="The scenario's id (or its files/<id> folder).")
    parser.add_argument("into", type=Path, help="A new folder for the repository.")
    args = parser.parse_args(argv)
    scenario = load_suite(pattern=Path(args.scenario).name).scenarios[0]
    if scenario.sources is None or not scenario.sources.has_history:
        parser.error(f"{scenario.id} has no git history")
    ranges = build(Path(scenario.sources.directory), scenario.sources.releases, args.into)
    for version, rev_range in ranges.items():
        print(f"{version}: {rev_range}")


if __name__ == "__main__":
    main()
