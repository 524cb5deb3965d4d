"""The backtest carries the earlier commits from tag to tag: the verdicts are the ones the
history read from the database gives, on a repository where who touched what before counts
(three authors, one of them without an email, new files and folders, an author coming back)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from unittest import mock

import pytest

from releases.models import Release
from sources import history
from sources.backtest import release_tags, replay
from sources.earlier_commits import EarlierCommits

pytestmark = pytest.mark.django_db

AUTHORS = {"ada": "ada@example.com", "bo": "bo@example.com", "cy": ""}


def _commit(repo: Path, author: str, path: str, when: int) -> None:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{author} {when}\n")
    stamp = f"{1_700_000_000 + when * 3600} +0000"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": author,
        "GIT_AUTHOR_EMAIL": AUTHORS[author],
        "GIT_COMMITTER_NAME": "ci",
        "GIT_COMMITTER_EMAIL": "ci@example.com",
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
    }
    for args in (["add", "-A"], ["commit", "-q", "-m", f"{author} changes {path}"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


def _tag(repo: Path, name: str) -> None:
    subprocess.run(["git", "-C", str(repo), "tag", name], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    plan = [
        [("ada", "src/app.py")],
        [("ada", "src/app.py"), ("bo", "src/payments/gateway.py")],
        [("cy", "src/catalog/search.py"), ("bo", "src/payments/gateway.py")],
        [("ada", "src/payments/refund.py"), ("cy", "src/catalog/search.py")],
        [("bo", "src/app.py"), ("cy", "infra/deploy.yml"), ("ada", "src/app.py")],
    ]
    when = 0
    for number, commits in enumerate(plan):
        for author, path in commits:
            when += 1
            _commit(root, author, path, when)
        _tag(root, f"v1.{number}.0")
    return root


def test_carried_commits_give_the_verdicts_the_database_gives(repo: Path) -> None:
    tags = release_tags(repo, "v*")
    with mock.patch.object(history, "_commit_rows", wraps=history._commit_rows) as rows:
        carried = replay("shop", repo, tags).as_dict()
    # The carried path was taken: no release read its authors' earlier commits again.
    assert rows.call_count == len(tags) - 1
    assert all(call.kwargs == {"authors": False} for call in rows.call_args_list)

    with mock.patch.object(history, "_carries_the_earlier", return_value=False):
        from_database = replay("shop", repo, tags).as_dict()

    assert carried == from_database
    assert len(carried["releases"]) == 4


def test_carried_commits_give_the_history_the_database_gives(repo: Path) -> None:
    replay("shop", repo, release_tags(repo, "v*"), keep=True)
    releases = list(Release.objects.filter(service__name="shop").order_by("deployed_at"))
    carried = EarlierCommits()
    earlier_commits = new_directories = 0
    for release in releases:
        with mock.patch.object(history, "_commit_rows", wraps=history._commit_rows) as rows:
            # A window of one release: the older commits come only from what is carried.
            from_carry = history.read_history(release, window=1, carried=carried)
        assert rows.call_args.kwargs == {"authors": False}
        assert from_carry == history.read_history(release, window=1)
        assert from_carry.changes is not None
        for author in from_carry.changes.authors:
            earlier_commits += author.earlier_commits
            new_directories += len(author.new_directories)
        carried.add_release(release.pk)
    # The releases exercise what the carried commits decide: authors coming back, and new
    # folders for some.
    assert earlier_commits >= 5 and new_directories >= 2


def test_rows_are_found_by_email_and_by_name() -> None:
    carried = EarlierCommits()
    carried.add(1, [(10, "ada", "ada@example.com", "a.py"), (11, "cy", "", None)])
    carried.add(2, [(12, "cy", "cy@example.com", "b.py")])
    assert carried.releases == {1, 2}
    assert carried.rows_for(["ada@example.com"], []) == [(10, "ada", "ada@example.com", "a.py")]
    # A name matches a commit of that name whatever its email, as the history's filter does.
    assert sorted(carried.rows_for([], ["cy"])) == [
        (11, "cy", "", None),
        (12, "cy", "cy@example.com", "b.py"),
    ]
    assert carried.rows_for(["nobody@example.com"], ["nobody"]) == []
