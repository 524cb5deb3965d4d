"""Hunks read from a git repository built in the test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from detective_client.git import EmptyRange
from detective_client.hunks import FileHunks, Hunk, parse_log_patch, read_hunks, skipped_file


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "config", "user.name", "Mira Holt")
    _git(tmp_path, "config", "user.email", "mira@example.org")
    (tmp_path / "src").mkdir()
    (tmp_path / "src/timed.py").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    (tmp_path / "notes.sql").write_text("-- a comment\nselect 1;\n")
    _commit(tmp_path, "start")
    _git(tmp_path, "tag", "v1")
    return tmp_path


def test_changed_added_and_removed_lines_in_both_numberings(repo: Path) -> None:
    lines = (repo / "src/timed.py").read_text().splitlines()
    lines[4] = "line five changed"  # line 5
    lines.insert(10, "new a")  # after old line 10: new lines 11-12
    lines.insert(11, "new b")
    del lines[17]  # old line 16 removed (17 after the two inserted... minus the shift)
    (repo / "src/timed.py").write_text("\n".join(lines) + "\n")
    sha = _commit(repo, "edit")
    (commit,) = read_hunks(repo, "v1..HEAD").commits
    assert commit.sha == sha
    assert commit.files == (
        FileHunks(
            "src/timed.py",
            None,
            (Hunk(5, 1, 5, 1), Hunk(10, 0, 11, 2), Hunk(16, 1, 17, 0)),
        ),
    )


def test_rename_keeps_both_paths_and_binary_and_lock_files_give_no_hunks(repo: Path) -> None:
    _git(repo, "mv", "src/timed.py", "src/clock.py")
    text = (repo / "src/clock.py").read_text().replace("line 3\n", "line three\n")
    (repo / "src/clock.py").write_text(text)
    (repo / "logo.png").write_bytes(bytes(range(256)) * 4)
    (repo / "uv.lock").write_text("[[package]]\nname = 'x'\n")
    _commit(repo, "rename")
    found = read_hunks(repo, "v1..HEAD")
    (commit,) = found.commits
    assert commit.files == (FileHunks("src/clock.py", "src/timed.py", (Hunk(3, 1, 3, 1),)),)
    assert found.skipped_files == ("uv.lock",)


def test_a_removed_sql_comment_is_not_read_as_a_file_header(repo: Path) -> None:
    (repo / "notes.sql").write_text("select 1;\n")
    _commit(repo, "drop the comment")
    (commit,) = read_hunks(repo, "v1..HEAD").commits
    assert commit.files == (FileHunks("notes.sql", None, (Hunk(1, 1, 0, 0),)),)


def test_deleted_file_keeps_its_path_and_merges_give_none(repo: Path) -> None:
    _git(repo, "checkout", "-q", "-b", "side")
    (repo / "notes.sql").unlink()
    side = _commit(repo, "delete notes")
    _git(repo, "checkout", "-q", "main")
    (repo / "src/timed.py").write_text("first\n" + (repo / "src/timed.py").read_text())
    main = _commit(repo, "prepend")
    _git(repo, "merge", "-q", "--no-edit", "side")
    merge = _git(repo, "rev-parse", "HEAD")
    found = {c.sha: c.files for c in read_hunks(repo, "v1..HEAD").commits}
    assert found[merge] == ()
    assert found[side] == (FileHunks("notes.sql", None, (Hunk(1, 2, 0, 0),)),)
    assert found[main] == (FileHunks("src/timed.py", None, (Hunk(0, 0, 1, 1),)),)


def test_the_bound_stops_reading_and_says_so(repo: Path) -> None:
    for n in range(3):
        text = (repo / "src/timed.py").read_text().replace(f"line {n + 1}\n", f"L{n}\n")
        (repo / "src/timed.py").write_text(text)
        _commit(repo, f"edit {n}")
    found = read_hunks(repo, "v1..HEAD", limit=2)
    assert found.truncated
    assert len(found.commits) == 2
    assert not read_hunks(repo, "v1..HEAD", limit=3).truncated


def test_an_empty_range_is_an_error(repo: Path) -> None:
    with pytest.raises(EmptyRange):
        read_hunks(repo, "v1..v1")


@pytest.mark.parametrize(
    ("path", "skipped"),
    [
        ("package-lock.json", True),
        ("web/yarn.lock", True),
        ("Cargo.lock", True),
        ("static/app.min.js", True),
        ("api/v1/x_pb2.py", True),
        ("src/lock.py", False),
        ("src/timed.py", False),
    ],
)
def test_skipped_files(path: str, skipped: bool) -> None:
    assert skipped_file(path) is skipped


def test_parse_a_quoted_path() -> None:
    text = [
        "\x1ecommit " + "a" * 40,
        'diff --git "a/x\\ty.py" "b/x\\ty.py"',
        '--- "a/x\\ty.py"',
        '+++ "b/x\\ty.py"',
        "@@ -1 +1 @@",
        "-a",
        "+b",
    ]
    (commit,) = parse_log_patch(text).commits
    assert commit.files == (FileHunks("x\ty.py", None, (Hunk(1, 1, 1, 1),)),)


def test_blame_follows_a_branch_merged_at_the_end(repo: Path) -> None:
    from detective_client.hunks import BlamedLines, blame_at_head

    fork = _git(repo, "rev-parse", "HEAD")
    # On main: two lines added at the top, which shift everything below.
    (repo / "src/timed.py").write_text("a\nb\n" + (repo / "src/timed.py").read_text())
    main = _commit(repo, "prepend two")
    # On a branch from the fork point: line 10 changed (line 12 once merged).
    _git(repo, "checkout", "-q", "-b", "side", fork)
    text = (repo / "src/timed.py").read_text().replace("line 10\n", "line ten\n")
    (repo / "src/timed.py").write_text(text)
    side = _commit(repo, "change line 10")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-edit", "side")
    found = blame_at_head(repo, "v1..HEAD", ["src/timed.py", "gone.py"])
    assert sorted(found, key=lambda b: b.start) == [
        BlamedLines("src/timed.py", 1, 2, main),
        BlamedLines("src/timed.py", 12, 12, side),
    ]
