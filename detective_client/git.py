"""Read a range of a local git checkout into `CommitRecord`s, with the `git` command.

Why the command and not a library: the CI job that runs the client has `git` already (it made
the checkout), `git log --numstat -z` gives everything in one process and one pass (5,000
commits well under a second; `bench_git.py` prints the figure), and the Python libraries either
wrap the same command (GitPython) or need a native build (pygit2) for no gain here.

Decisions:
- Merge commits are kept (sha, author, message, both parents) with no files: the commits they
  bring in are in the range too and carry the files, so counting the merge's diff as well would
  count every change twice. A conflict resolution made in the merge itself is therefore not
  counted; the merged commits are.
- Renames are detected (`-M`) and keep their old path; a binary file has None for its line counts.
- A range whose two refs name the same commit is a rebuild (a tag placed on the previous
  release's commit): a release with no changes, an empty list (`is_rebuild` tells it apart).
  Any other range with no commits is an `EmptyRange` error: a release whose range holds nothing
  while its refs differ is a wrong ref (the refs swapped), and the pipeline should hear that.
- A ref that does not exist is an `UnknownRef` error naming it, checked before `git log` runs.
- Each file is marked generated or vendored as it stands at the range's head (`generated.py`:
  `.gitattributes` through `git check-attr`, else a generator's header in its first KiB), and
  removed when its commit deleted it (git's status D, from `--raw`). A file the head no longer
  has is read at the range's start. One `git cat-file --batch` reads every header.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path

from detective_client.generated import HEADER_BYTES, attribute_flag, is_generated
from detective_client.records import CommitRecord, FileChangeRecord

# Unit and record separators: they do not occur in names, emails, dates or hashes.
_RECORD = "\x1e"
_FIELD = "\x1f"
_FORMAT = f"{_RECORD}%H{_FIELD}%P{_FIELD}%an{_FIELD}%ae{_FIELD}%aI{_FIELD}%B{_FIELD}"
# A record starts at a separator followed by a full hash, so a message that happens to hold
# the separator does not split a commit in two.
_SPLIT = re.compile(f"{_RECORD}(?=[0-9a-f]{{40}}{_FIELD}|[0-9a-f]{{64}}{_FIELD})")
_TIMEOUT_SECONDS = 300


class GitError(Exception):
    """The range could not be read; the message says why in words a pipeline log can show."""


class NotARepository(GitError):
    pass


class UnknownRef(GitError):
    def __init__(self, ref: str, repo: Path) -> None:
        super().__init__(f"the ref {ref!r} does not exist in {repo} (fetched with its tags?)")
        self.ref = ref


class EmptyRange(GitError):
    def __init__(self, rev_range: str) -> None:
        super().__init__(f"the range {rev_range!r} holds no commits (are the refs swapped?)")
        self.rev_range = rev_range


def _command(repo: Path, *args: str) -> list[str]:
    # The settings that change what log prints are fixed here, whatever the job's config says;
    # a machine's own attributes file must not make a file generated either.
    return [
        "git",
        "-C",
        str(repo),
        "-c",
        "core.quotepath=off",
        "-c",
        "i18n.logOutputEncoding=UTF-8",
        "-c",
        "log.showSignature=false",
        "-c",
        f"core.attributesFile={os.devnull}",
        *args,
    ]


def _environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", **extra}


def _git(
    repo: Path, *args: str, stdin: bytes | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            _command(repo, *args),
            input=stdin,
            capture_output=True,
            timeout=_TIMEOUT_SECONDS,
            env=_environment(**(env or {})),
            check=False,
        )
    except FileNotFoundError:
        raise GitError("the git command is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git did not answer within {_TIMEOUT_SECONDS} s") from None


def split_range(rev_range: str) -> tuple[str | None, str]:
    """('A', 'B') for 'A..B', (None, 'B') for a single ref. 'A...B' is refused: a symmetric
    difference is not a release's history."""
    text = rev_range.strip()
    if not text:
        raise GitError("the range is empty: give 'FROM..TO' or a single ref")
    if "..." in text:
        raise GitError(f"{rev_range!r}: use 'FROM..TO' (two dots), not a symmetric difference")
    start, dots, end = text.partition("..")
    if not dots:
        start, end = "", text
    elif not start or not end:
        raise GitError(f"{rev_range!r}: give both ends, as in 'v1.2.0..v1.3.0'")
    for ref in (start, end):
        if ref.startswith("-") or any(char.isspace() for char in ref):
            raise GitError(f"{ref!r} is not a ref")
    return (start or None), end


def resolve(repo: Path, ref: str) -> str:
    """The commit SHA a ref names, or `UnknownRef`."""
    done = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if done.returncode != 0:
        raise UnknownRef(ref, repo)
    return done.stdout.decode().strip()


def tag_subject(repo: Path, ref: str) -> str | None:
    """The first line of an annotated tag's message, when `ref` is one (a release's title);
    None for a lightweight tag, a branch or a commit."""
    tag = f"refs/tags/{ref.removeprefix('refs/tags/')}"
    kind = _git(repo, "cat-file", "-t", tag)
    if kind.returncode != 0 or kind.stdout.decode().strip() != "tag":
        return None
    done = _git(repo, "for-each-ref", "--format=%(contents:subject)", tag)
    subject = done.stdout.decode("utf-8", "replace").strip()
    return subject or None


def _check_repository(repo: Path) -> None:
    if not repo.is_dir():
        raise NotARepository(f"{repo} is not a folder")
    done = _git(repo, "rev-parse", "--git-dir")
    if done.returncode != 0:
        raise NotARepository(f"{repo} is not a git checkout")


def _files(numstat: str) -> tuple[FileChangeRecord, ...]:
    # With -z each --raw entry is ":modes shas STATUS<NUL>path<NUL>" (a rename or copy:
    # "...R100<NUL>old<NUL>new<NUL>"), then each numstat entry "added<TAB>deleted<TAB>path<NUL>",
    # a rename "added<TAB>deleted<TAB><NUL>old<NUL>new<NUL>". A binary file has "-" for both
    # counts. Only the raw entries' status is read: D, the commit deleted the file.
    tokens = numstat.lstrip("\n").split("\0")
    changes: list[FileChangeRecord] = []
    removed: set[str] = set()
    index = 0
    while index < len(tokens):
        token = tokens[index].lstrip("\n")
        index += 1
        if not token:
            continue
        if token.startswith(":"):
            status = token.rsplit(" ", 1)[-1]
            if status == "D":
                removed.add(tokens[index])
            index += 2 if status[:1] in ("R", "C") else 1
            continue
        added, deleted, path = token.split("\t", 2)
        old_path: str | None = None
        if not path:
            old_path, path = tokens[index], tokens[index + 1]
            index += 2
        changes.append(
            FileChangeRecord(
                path=path,
                old_path=old_path,
                added=None if added == "-" else int(added),
                deleted=None if deleted == "-" else int(deleted),
                removed=old_path is None and path in removed,
            )
        )
    return tuple(changes)


def _commit(chunk: str) -> CommitRecord:
    sha, parents, name, email, date, rest = chunk.split(_FIELD, 5)
    message, _, numstat = rest.rpartition(_FIELD)
    return CommitRecord(
        sha=sha,
        author_name=name,
        author_email=email,
        authored_at=datetime.fromisoformat(date),
        message=message.rstrip("\n"),
        files=_files(numstat),
        parents=tuple(parents.split()),
    )


def is_rebuild(repo: Path, rev_range: str) -> bool:
    """Both refs of 'FROM..TO' name the same commit: a release with no changes."""
    start, end = split_range(rev_range)
    return start is not None and resolve(Path(repo), start) == resolve(Path(repo), end)


def read_range(repo: Path, rev_range: str) -> list[CommitRecord]:
    """The commits of `rev_range` ('FROM..TO': reachable from TO, not from FROM; or a single
    ref: all its history), newest first as `git log` gives them; none for a rebuild (both
    refs the same commit)."""
    repo = Path(repo)
    start, end = split_range(rev_range)
    _check_repository(repo)
    end_sha = resolve(repo, end)
    start_sha = None if start is None else resolve(repo, start)
    if start_sha == end_sha:
        return []
    selection = [end_sha] if start_sha is None else [f"^{start_sha}", end_sha]
    done = _git(
        repo,
        "log",
        "-z",
        "--raw",
        "--numstat",
        "-M",
        "--diff-merges=off",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        f"--format={_FORMAT}",
        "--end-of-options",
        *selection,
    )
    if done.returncode != 0:
        error = done.stderr.decode(errors="replace").strip()
        raise GitError(f"git log {rev_range} failed: {error}")
    output = done.stdout.decode("utf-8", errors="replace")
    commits = [_commit(chunk) for chunk in _SPLIT.split(output) if chunk]
    if not commits:
        raise EmptyRange(rev_range)
    return _marked(repo, start_sha, end_sha, commits)


def _marked(
    repo: Path, start_sha: str | None, end_sha: str, commits: list[CommitRecord]
) -> list[CommitRecord]:
    """The commits with each file marked generated or vendored as it stands at the head (or,
    gone there, at the range's start)."""
    paths = sorted({f.path for c in commits for f in c.files})
    if not paths:
        return commits
    attributes = _attributes(repo, end_sha, paths)
    # A binary file has no header to read (and may be large); its attributes still count.
    binary = {f.path for c in commits for f in c.files if f.binary}
    texts = [p for p in paths if attributes.get(p, (None, None))[0] is None and p not in binary]
    heads = _heads(repo, end_sha, texts)
    if start_sha is not None:
        heads.update(_heads(repo, start_sha, [p for p in texts if p not in heads]))
    flags = {
        p: (is_generated(attributes.get(p, (None, None))[0], heads.get(p)),
            attributes.get(p, (None, None))[1] is True)
        for p in paths
    }  # fmt: skip
    return [
        dataclasses.replace(
            c,
            files=tuple(
                dataclasses.replace(f, generated=flags[f.path][0], vendored=flags[f.path][1])
                for f in c.files
            ),
        )
        for c in commits
    ]


_ATTRIBUTES = ("linguist-generated", "linguist-vendored")


def _attributes(repo: Path, treeish: str, paths: list[str]) -> dict[str, tuple[bool | None, ...]]:
    """Per path (linguist-generated, linguist-vendored) as the `.gitattributes` files of
    `treeish` set them (None: not said). git 2.39 has no `check-attr --source`, so the tree
    is read into an index of our own, outside the repository, and asked with `--cached`."""
    listing = _git(repo, "ls-tree", "-r", "-z", "--name-only", treeish)
    names = listing.stdout.decode("utf-8", errors="replace").split("\0")
    if listing.returncode != 0 or not any(n.rsplit("/", 1)[-1] == ".gitattributes" for n in names):
        return {}
    with tempfile.TemporaryDirectory(prefix="detective-attr-") as folder:
        index = {"GIT_INDEX_FILE": str(Path(folder) / "index")}
        if _git(repo, "read-tree", treeish, env=index).returncode != 0:
            return {}
        done = _git(
            repo,
            "check-attr",
            "--cached",
            "-z",
            "--stdin",
            *_ATTRIBUTES,
            stdin=b"".join(p.encode() + b"\0" for p in paths),
            env=index,
        )
    if done.returncode != 0:
        return {}
    # -z: "path<NUL>attribute<NUL>value<NUL>" for each path and attribute.
    fields = done.stdout.decode("utf-8", errors="replace").split("\0")
    found: dict[str, list[bool | None]] = {}
    for path, attribute, value in zip(fields[0::3], fields[1::3], fields[2::3], strict=False):
        if attribute in _ATTRIBUTES:
            found.setdefault(path, [None, None])[_ATTRIBUTES.index(attribute)] = attribute_flag(
                value
            )
    return {path: tuple(values) for path, values in found.items()}


def _heads(repo: Path, treeish: str, paths: Iterable[str]) -> dict[str, bytes]:
    """The first `HEADER_BYTES` of each path's blob in `treeish`, for the paths it has. One
    `git cat-file --batch` streams them all; only each blob's start is kept."""
    wanted = [p for p in paths if "\n" not in p]
    if not wanted:
        return {}
    process = subprocess.Popen(
        _command(repo, "cat-file", "--batch"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_environment(),
    )
    assert process.stdin is not None and process.stdout is not None
    # A stuck git is killed; the reads below then end.
    timer = threading.Timer(_TIMEOUT_SECONDS, process.kill)
    timer.start()

    def send() -> None:
        try:
            for path in wanted:
                process.stdin.write(f"{treeish}:{path}\n".encode())  # type: ignore[union-attr]
            process.stdin.close()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError):
            pass

    writer = threading.Thread(target=send, daemon=True)
    writer.start()
    found: dict[str, bytes] = {}
    try:
        for path in wanted:
            header = process.stdout.readline().decode("utf-8", errors="replace").split()
            if len(header) != 3 or not header[2].isdigit():
                continue  # "<name> missing" (or ambiguous): the tree has no such file
            size = int(header[2])
            head = process.stdout.read(min(size, HEADER_BYTES))
            left = size - len(head) + 1  # and the newline after the content
            while left > 0:
                chunk = process.stdout.read(min(left, 1 << 20))
                if not chunk:
                    break
                left -= len(chunk)
            if header[1] == "blob":
                found[path] = head
    finally:
        timer.cancel()
        writer.join(timeout=5)
        process.stdout.close()
        process.wait()
    return found
