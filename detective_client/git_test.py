"""`read_range` on a real repository made here with the `git` command: tags, a merge, a rename,
a binary file, and the hostile ranges (none, unknown refs, not a checkout)."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from detective_client.git import (
    EmptyRange,
    GitError,
    NotARepository,
    UnknownRef,
    is_rebuild,
    read_range,
    resolve,
    split_range,
)
from detective_client.records import FileChangeRecord


def git(repo: Path, *args: str, date: str = "2026-11-20T10:00:00+01:00") -> str:
    environment = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada Lovelace",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": "Ada Lovelace",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
        "GIT_COMMITTER_DATE": date,
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo.parent),
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=environment
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """v1.0.0: a first commit. v1.1.0: a feature branch merged (with a rename and a binary file),
    a fix on main, and a breaking change."""
    root = tmp_path_factory.mktemp("checkout") / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "app.py").write_text("".join(f"line {n}\n" for n in range(20)))
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "feat: first version")
    git(root, "tag", "v1.0.0")

    git(root, "switch", "-q", "-c", "feature")
    git(root, "mv", "app.py", "service.py")
    with (root / "service.py").open("a") as handle:
        handle.write("line 20\n")
    git(
        root,
        "commit",
        "-q",
        "-a",
        "-m",
        "refactor(core): rename app to service",
        date="2026-11-21T09:00:00Z",
    )
    (root / "logo.png").write_bytes(bytes(range(256)) * 4)
    git(root, "add", "logo.png")
    git(root, "commit", "-q", "-m", "feat(ui): a logo", date="2026-11-21T10:00:00Z")

    git(root, "switch", "-q", "main")
    (root / "README").write_text("hello\nworld\n")
    git(root, "add", "README")
    git(root, "commit", "-q", "-m", "fix: say hello", date="2026-11-21T11:00:00Z")
    git(
        root,
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "Merge branch 'feature'",
        "feature",
        date="2026-11-21T12:00:00Z",
    )
    (root / "README").write_text("hello\n")
    git(
        root,
        "commit",
        "-q",
        "-am",
        "feat(api)!: drop the world\n\nBREAKING CHANGE: gone",
        date="2026-11-22T08:30:00-05:00",
    )
    git(root, "tag", "-a", "v1.1.0", "-m", "release 1.1.0")
    return root


def test_a_tagged_range_gives_its_commits_newest_first(repo: Path) -> None:
    commits = read_range(repo, "v1.0.0..v1.1.0")
    assert [commit.message.splitlines()[0] for commit in commits] == [
        "feat(api)!: drop the world",
        "Merge branch 'feature'",
        "fix: say hello",
        "feat(ui): a logo",
        "refactor(core): rename app to service",
    ]
    newest = commits[0]
    assert newest.sha == resolve(repo, "v1.1.0")
    assert newest.message == "feat(api)!: drop the world\n\nBREAKING CHANGE: gone"
    assert newest.author_name == "Ada Lovelace"
    assert newest.author_email == "ada@example.com"
    assert newest.authored_at == datetime(2026, 11, 22, 13, 30, tzinfo=UTC)
    assert newest.authored_at.utcoffset() is not None


def test_a_rename_keeps_its_old_path_and_counts_its_lines(repo: Path) -> None:
    [rename] = [c for c in read_range(repo, "v1.0.0..v1.1.0") if c.message.startswith("refactor")]
    [change] = rename.files
    assert (change.path, change.old_path, change.added, change.deleted) == (
        "service.py",
        "app.py",
        1,
        0,
    )


def test_a_binary_file_has_no_line_counts(repo: Path) -> None:
    [logo] = [c for c in read_range(repo, "v1.0.0..v1.1.0") if c.message.startswith("feat(ui)")]
    [change] = logo.files
    assert (change.path, change.old_path, change.added, change.deleted) == (
        "logo.png",
        None,
        None,
        None,
    )
    assert change.binary


def test_a_merge_lists_both_parents_and_no_files(repo: Path) -> None:
    commits = read_range(repo, "v1.0.0..v1.1.0")
    [merge] = [commit for commit in commits if commit.merge]
    assert merge.files == ()
    by_message = {commit.message.splitlines()[0]: commit.sha for commit in commits}
    assert merge.parents == (by_message["fix: say hello"], by_message["feat(ui): a logo"])
    # The merged changes are counted once, on the commits that made them.
    paths = [change.path for commit in commits for change in commit.files]
    assert sorted(paths) == ["README", "README", "logo.png", "service.py"]


def test_ordinary_changes_count_added_and_deleted_lines(repo: Path) -> None:
    newest = read_range(repo, "v1.0.0..v1.1.0")[0]
    [change] = newest.files
    assert (change.path, change.added, change.deleted) == ("README", 0, 1)


def test_a_single_ref_reads_all_its_history(repo: Path) -> None:
    [first] = read_range(repo, "v1.0.0")
    assert first.parents == ()
    assert first.files[0].path == "app.py"
    assert first.files[0].added == 20


def test_records_survive_json(repo: Path) -> None:
    from detective_client.records import CommitRecord

    for commit in read_range(repo, "v1.0.0..v1.1.0"):
        assert CommitRecord.from_json(commit.to_json()) == commit


def test_a_range_with_no_commits_is_a_clear_error(repo: Path) -> None:
    with pytest.raises(EmptyRange, match=r"'v1.1.0..v1.0.0' holds no commits"):
        read_range(repo, "v1.1.0..v1.0.0")
    assert not is_rebuild(repo, "v1.1.0..v1.0.0")


def test_a_rebuild_is_a_release_with_no_changes(repo: Path) -> None:
    # A tag placed on the previous release's commit: both refs name the same commit.
    assert read_range(repo, "v1.1.0..v1.1.0") == []
    head = resolve(repo, "v1.1.0")
    assert read_range(repo, f"v1.1.0..{head}") == []
    assert is_rebuild(repo, f"v1.1.0..{head}")
    assert not is_rebuild(repo, "v1.0.0..v1.1.0")
    with pytest.raises(UnknownRef):
        read_range(repo, "v1.1.0..v9.9.9")


@pytest.mark.parametrize(
    ("rev_range", "missing"),
    [("v1.0.0..v9.9.9", "v9.9.9"), ("nope..v1.1.0", "nope"), ("deadbeef", "deadbeef")],
)
def test_a_ref_that_does_not_exist_is_named(repo: Path, rev_range: str, missing: str) -> None:
    with pytest.raises(UnknownRef, match=f"the ref '{missing}' does not exist") as raised:
        read_range(repo, rev_range)
    assert raised.value.ref == missing


@pytest.mark.parametrize(
    ("rev_range", "reason"),
    [
        ("", "the range is empty"),
        ("v1.0.0...v1.1.0", "two dots"),
        ("v1.0.0..", "give both ends"),
        ("..v1.1.0", "give both ends"),
        ("--output=/tmp/x..v1.1.0", "is not a ref"),
        ("v1.0.0..v1.1.0 --all", "is not a ref"),
    ],
)
def test_a_malformed_range_is_refused_before_git_runs(rev_range: str, reason: str) -> None:
    with pytest.raises(GitError, match=reason):
        split_range(rev_range)


def test_a_folder_that_is_not_a_checkout_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NotARepository, match="is not a git checkout"):
        read_range(tmp_path, "v1.0.0..v1.1.0")
    with pytest.raises(NotARepository, match="is not a folder"):
        read_range(tmp_path / "absent", "v1.0.0..v1.1.0")


# ---- generated, vendored and removed files ------------------------------------------------------

IDNA_LIKE_HEADER = (
    "# This file is automatically generated by tools/make-tables.py\n"
    "# vim: set fileencoding=utf-8 :\n\n"
)


def _table(rows: int, start: int = 0) -> str:
    return (
        IDNA_LIKE_HEADER
        + "codepoints = (\n"
        + "".join(f"    0x{n:04x},\n" for n in range(start, start + rows))
        + ")\n"
    )


@pytest.fixture(scope="module")
def marked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """v1: tables with a generator's header, `.gitattributes` (root and nested) saying which
    files are generated, vendored or not generated, a public API file. v2: all of them changed,
    the API file and an old table deleted."""
    root = tmp_path_factory.mktemp("marked") / "repo"
    (root / "src").mkdir(parents=True)
    for folder in ("gen", "third", "api/v1", "pkg/sub"):
        (root / folder).mkdir(parents=True)
    (root / ".gitattributes").write_text(
        "gen/** linguist-generated\nthird/** linguist-vendored\n"
        "src/keep_tables.py -linguist-generated\n"
    )
    (root / "pkg" / ".gitattributes").write_text("*.dat.py linguist-generated=true\n")
    (root / "src" / "tables.py").write_text(_table(50))
    (root / "src" / "old_tables.py").write_text(_table(30))
    (root / "src" / "keep_tables.py").write_text(_table(5))
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "gen" / "schema.py").write_text("FIELDS = ['a']\n")
    (root / "third" / "lib.py").write_text("def helper():\n    pass\n")
    (root / "pkg" / "sub" / "codes.dat.py").write_text("CODES = [1]\n")
    (root / "api" / "v1" / "orders.py").write_text("def list_orders():\n    return []\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    git(root, "tag", "v1")
    (root / "src" / "tables.py").write_text(_table(3000, start=7))
    git(root, "commit", "-q", "-am", "Update to Unicode 16")
    (root / "src" / "keep_tables.py").write_text(_table(6))
    (root / "src" / "app.py").write_text("def main():\n    return 2\n")
    (root / "gen" / "schema.py").write_text("FIELDS = ['a', 'b']\n")
    (root / "third" / "lib.py").write_text("def helper():\n    return 1\n")
    (root / "pkg" / "sub" / "codes.dat.py").write_text("CODES = [1, 2]\n")
    git(root, "commit", "-q", "-am", "Change the rest")
    git(root, "rm", "-q", "api/v1/orders.py", "src/old_tables.py")
    git(root, "commit", "-q", "-m", "Drop the orders endpoint and the old tables")
    git(root, "tag", "v2")
    return root


def _files_by_path(repo: Path) -> dict[str, FileChangeRecord]:
    return {f.path: f for c in read_range(repo, "v1..v2") for f in c.files}


def test_a_generators_header_at_the_head_marks_the_file_generated(marked: Path) -> None:
    files = _files_by_path(marked)
    assert files["src/tables.py"].generated and (
        files["src/tables.py"].added,
        files["src/tables.py"].deleted,
    ) == (2957, 7)
    assert not files["src/app.py"].generated and not files["src/app.py"].vendored


def test_gitattributes_mark_generated_and_vendored_files_and_can_say_not(marked: Path) -> None:
    files = _files_by_path(marked)
    assert files["gen/schema.py"].generated  # root .gitattributes, no header
    assert files["pkg/sub/codes.dat.py"].generated  # a nested .gitattributes
    assert files["third/lib.py"].vendored and not files["third/lib.py"].generated
    # -linguist-generated: the project says this one is written by hand, header or not.
    assert not files["src/keep_tables.py"].generated


def test_a_deleted_file_is_removed_and_read_at_the_ranges_start(marked: Path) -> None:
    files = _files_by_path(marked)
    assert files["api/v1/orders.py"].removed and not files["api/v1/orders.py"].generated
    assert files["src/old_tables.py"].removed and files["src/old_tables.py"].generated
    assert not any(
        f.removed for p, f in files.items() if p not in ("api/v1/orders.py", "src/old_tables.py")
    )


def test_a_rename_is_not_a_removal(repo: Path) -> None:
    changes = [f for c in read_range(repo, "v1.0.0..v1.1.0") for f in c.files]
    assert [f.path for f in changes if f.old_path] == ["service.py"]
    assert not any(f.removed or f.generated or f.vendored for f in changes)


def test_the_flags_survive_json(marked: Path) -> None:
    from detective_client.records import CommitRecord

    for commit in read_range(marked, "v1..v2"):
        assert CommitRecord.from_json(commit.to_json()) == commit


def test_a_machines_own_attributes_file_marks_nothing(marked: Path, tmp_path: Path) -> None:
    attributes = tmp_path / "attributes"
    attributes.write_text("*.py linguist-generated\n")
    git(marked, "config", "core.attributesFile", str(attributes))
    try:
        assert not _files_by_path(marked)["src/app.py"].generated
    finally:
        git(marked, "config", "--unset", "core.attributesFile")
