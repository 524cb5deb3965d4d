"""What a commit is and what it touches, read from its files, its author and its subject.

Why files and not words: on 15 real release ranges of five open-source projects every release
read "changes in auth and payments" when the areas came from words anywhere in a message
(`Co-authored-by:` trailers read as auth, dependabot's "Bump actions/checkout" as payments). A
commit's area is where its code lies (`PolicySettings.change_area_paths`, globs per area the way
CODEOWNERS names owners); a word counts only as a whole word in the subject of a commit that is
not a bot's, and then only as a mention (risk/history_signals.py). Trailers are never content.

Plain Python, no Django: `sources.history` and the measurement scripts build `CommitFacts` with
`commit_facts`.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

FileKind = Literal[
    "code", "schema", "test", "docs", "ci", "lock", "manifest", "vendored", "generated",
    "example", "config", "asset", "translation",
]  # fmt: skip
CommitKind = Literal["merge", "revert", "dependencies", "ci", "docs", "tests", "code"]

# Files whose lines are a change's size: code and schema. Everything else is said apart.
CODE_KINDS = frozenset({"code", "schema"})
DEPENDENCY_KINDS = frozenset({"lock", "manifest"})

_LOCK_NAMES = frozenset(
    {
        "uv.lock", "poetry.lock", "pipfile.lock", "pdm.lock", "package-lock.json", "yarn.lock",
        "pnpm-lock.yaml", "npm-shrinkwrap.json", "bun.lockb", "cargo.lock", "go.sum",
        "gemfile.lock", "composer.lock", "packages.lock.json", "gradle.lockfile", "mix.lock",
        "pubspec.lock", "podfile.lock",
    }
)  # fmt: skip
_MANIFEST_NAMES = frozenset(
    {
        "pyproject.toml", "setup.py", "setup.cfg", "pipfile", "package.json", "cargo.toml",
        "go.mod", "gemfile", "composer.json", "pom.xml", "build.gradle", "build.gradle.kts",
        "settings.gradle", "mix.exs", "pubspec.yaml", "podfile",
    }
)  # fmt: skip
_MANIFEST_GLOBS = ("requirements*.txt", "requirements/*", "*/requirements/*", "constraints*.txt")
_CI_GLOBS = (
    ".github/*", ".gitlab-ci.yml", ".gitlab/*", ".circleci/*", ".travis.yml", "azure-pipelines*",
    "jenkinsfile", ".buildkite/*", ".pre-commit-config.yaml", ".readthedocs.y*ml", "appveyor.yml",
    ".drone.yml", "bitbucket-pipelines.yml", ".woodpecker*",
)  # fmt: skip
_DOC_SUFFIXES = frozenset({".md", ".rst", ".adoc", ".txt", ".asciidoc"})
_DOC_GLOBS = ("docs/*", "doc/*", "*/docs/*", "site/*", "license*", "changes*", "changelog*",
              "authors*", "notice*", "src/site/*", "*.md", "*.rst")  # fmt: skip
_TEST_GLOBS = (
    "tests/*", "test/*", "*/tests/*", "*/test/*", "testing/*", "*/__tests__/*", "spec/*",
    "*/spec/*", "*/testdata/*", "*/test_data/*", "*/test-data/*", "*/fixtures/*", "test_*",
    "*/test_*", "*_test.*", "*.test.*",
    "*.spec.*", "*/conftest.py", "conftest.py", "*test.java", "*tests.java", "*test.kt",
    "benchmarks/*", "*/benchmark/*",
)  # fmt: skip
_VENDORED_GLOBS = ("vendor/*", "*/vendor/*", "third_party/*", "*/third_party/*", "*/_vendor/*",
                   "node_modules/*", "*/node_modules/*", "vendored/*", "*/vendored/*")  # fmt: skip
# Paths that name their generator (linguist's generated.rb names most of these): protobuf and
# gRPC stubs, minified bundles and their source maps, .NET designer files, Dart's build_runner
# output, Kubernetes' zz_generated files. Files generated under other names are told by their
# header or `.gitattributes` where git is read (detective_client/generated.py).
_GENERATED_GLOBS = (
    "*.min.js", "*.min.css", "*.map", "*_pb2.py", "*_pb2.pyi", "*_pb2_grpc.py", "*.pb.go",
    "*.pb.cc", "*.pb.h", "*_pb.js", "*_pb.d.ts", "*_grpc_pb.js", "*.pb.dart", "*.pbenum.dart",
    "*.g.dart", "*.freezed.dart", "*.designer.cs", "*.designer.vb", "*.feature.cs",
    "*zz_generated*", "*.generated.*", "*_generated.go", "dist/*", "*/__snapshots__/*",
    "*.snap", ".pnp.*", "*/.pnp.*",
)  # fmt: skip
_EXAMPLE_GLOBS = ("examples/*", "example/*", "*/examples/*", "samples/*", "demo/*")
# Translations: gettext catalogues (humanize 4.16.0's *.po and *.mo were 712 of its 988 lines
# counted as code), XLIFF, Qt's compiled catalogues, and the message folders of i18n libraries.
_TRANSLATION_SUFFIXES = frozenset({".po", ".mo", ".pot", ".xliff", ".xlf", ".qm"})
_TRANSLATION_GLOBS = ("*/lc_messages/*", "*/locale/*.json", "*/locales/*.json",
                      "locales/*.json", "*/i18n/*.json", "*/translations/*.json")  # fmt: skip
_ASSET_SUFFIXES = frozenset(
    {".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".webp", ".woff", ".woff2", ".ttf", ".eot",
     ".pdf"}
)  # fmt: skip
_CONFIG_SUFFIXES = frozenset({".toml", ".cfg", ".ini", ".yaml", ".yml", ".json", ".xml"})

# Trailers: "Token: value" lines of the message's last paragraph (git interpret-trailers).
_TRAILER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: .+$")
_BOT_NAMES = re.compile(
    r"(\[bot\]|^dependabot|^renovate|^pre-commit-ci|^github-actions|^greenkeeper|^snyk-bot"
    r"|^mergify|^allcontributors|^imgbot|^pyup-bot|^depfu|^whitesource)",
    re.IGNORECASE,
)
# dependabot's body, kept when a maintainer squashes its pull request under their own name.
_BOT_BODY = re.compile(r"^(updated-dependencies:|- dependency-name: )", re.MULTILINE)
_REVERT = re.compile(r"^(revert\b|revert(\(.*\))?!?:)", re.IGNORECASE)
_HEADER = re.compile(
    r"^(?P<type>[A-Za-z][A-Za-z0-9-]*)(?:\((?P<scope>[^()\r\n]*)\))?(?P<bang>!)?: "
)
_BREAKING_FOOTER = re.compile(r"^BREAKING[ -]CHANGE: ?\S", re.MULTILINE)
_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")

# The one line of changes a release whose range holds no commit has (both refs at the same
# commit: a rebuild). Written by the commits ingestion, read by the policy's `no_changes`.
NO_CHANGES = "No changes: a rebuild of the previous release's commit (the range holds no commit)"


def _matches(path: str, globs: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, glob) for glob in globs)


# The kinds a reader's flag (a generated header, `.gitattributes`) may turn into generated or
# vendored: a lock file, manifest, CI file, test, doc or schema says more by its path (yarn.lock
# says "DO NOT EDIT", a Django migration "Generated by Django" and is still a schema change).
_FLAGGABLE_KINDS = frozenset({"code", "config"})


def file_kind(path: str, *, generated: bool = False, vendored: bool = False) -> FileKind:
    """What a changed file is: its lines count as the change's size only for code and schema.
    `generated` and `vendored` are what the git reader found at the release's head (a header
    such as "Code generated ... DO NOT EDIT.", `linguist-generated` or `linguist-vendored` in
    `.gitattributes`); without them (an older client) the path alone decides."""
    kind = _path_kind(path)
    if kind in _FLAGGABLE_KINDS:
        if vendored:
            return "vendored"
        if generated:
            return "generated"
    return kind


@functools.lru_cache(maxsize=65536)
def _path_kind(path: str) -> FileKind:
    lowered = path.lower()
    name = PurePosixPath(lowered).name
    suffix = PurePosixPath(lowered).suffix
    if name in _LOCK_NAMES or name.endswith(".lock"):
        return "lock"
    if name in _MANIFEST_NAMES or _matches(lowered, _MANIFEST_GLOBS):
        return "manifest"
    if _matches(lowered, _CI_GLOBS):
        return "ci"
    if _matches(lowered, _VENDORED_GLOBS):
        return "vendored"
    if _matches(lowered, _GENERATED_GLOBS):
        return "generated"
    if _matches(lowered, _TEST_GLOBS) or "/src/test/" in f"/{lowered}":
        return "test"
    if _matches(lowered, _EXAMPLE_GLOBS):
        return "example"
    if suffix in _TRANSLATION_SUFFIXES or _matches(lowered, _TRANSLATION_GLOBS):
        return "translation"
    if _matches(lowered, _DOC_GLOBS) or (suffix in _DOC_SUFFIXES and "/" not in lowered):
        return "docs"
    if suffix in _ASSET_SUFFIXES:
        return "asset"
    if suffix in _DOC_SUFFIXES:
        return "docs"
    if _matches(lowered, _SCHEMA_GLOBS):
        return "schema"
    if (suffix in _CONFIG_SUFFIXES and "/" not in lowered) or name.startswith("."):
        return "config"
    return "code"


# Schema files are code whose change is a schema change (the migrations area's own globs
# widen this per service; these are the ones every stack names the same way).
_SCHEMA_GLOBS = ("*/migrations/*", "migrations/*", "*/alembic/*", "alembic/*", "*.sql",
                 "*/flyway/*", "*/liquibase/*", "*.prisma", "*/db/migrate/*")  # fmt: skip


def split_trailers(message: str) -> tuple[str, str, tuple[str, ...]]:
    """(subject, body without trailers, trailers). Trailers are the last paragraph when every
    line of it is `Token: value` (`Co-authored-by:`, `Signed-off-by:` ...)."""
    lines = message.strip().splitlines()
    if not lines:
        return "", "", ()
    subject, rest = lines[0].strip(), "\n".join(lines[1:]).strip()
    paragraphs = re.split(r"\n\s*\n", rest) if rest else []
    trailers: tuple[str, ...] = ()
    if paragraphs:
        last = [line.strip() for line in paragraphs[-1].splitlines() if line.strip()]
        if last and all(_TRAILER.match(line) for line in last):
            trailers = tuple(last)
            paragraphs = paragraphs[:-1]
    return subject, "\n\n".join(paragraphs), trailers


def is_bot(author_name: str, author_email: str, message: str) -> bool:
    """A bot's commit: by its author (dependabot[bot], renovate, pre-commit-ci[bot],
    github-actions[bot] ...), or a person's squash of a bot's pull request (a trailer naming a
    bot, dependabot's `updated-dependencies:` block)."""
    if _BOT_NAMES.search(author_name.strip()) or "[bot]@" in author_email.lower():
        return True
    _, body, trailers = split_trailers(message)
    if any(_BOT_NAMES.search(t.split(":", 1)[1].strip()) for t in trailers):
        return True
    return bool(_BOT_BODY.search(body))


def is_breaking(message: str) -> bool:
    """Conventional Commits' breaking change: `type(scope)!:` or a `BREAKING CHANGE:` footer."""
    subject, body, trailers = split_trailers(message)
    header = _HEADER.match(subject)
    if header is not None and header["bang"]:
        return True
    return bool(_BREAKING_FOOTER.search("\n".join([body, *trailers])))


_DEPENDENCY_SUBJECT = re.compile(
    r"^(\w+\((deps|deps-dev|dev-deps|dependencies|dependency)\)!?:|bump\b|\[pre-commit\.ci\]"
    r"|(chore|build|ci)(\(.*\))?!?: (bump|update)\b|update (dependency|module|rust crate)\b"
    r"|lock file maintenance\b|pin dependenc)",
    re.IGNORECASE,
)


def is_dependency_subject(subject: str) -> bool:
    """A subject in the shape dependabot, Renovate and pre-commit.ci write ("Bump X from A to
    B", "build(deps): ...", "Update dependency X to v2", "[pre-commit.ci] ...")."""
    return bool(_DEPENDENCY_SUBJECT.match(subject.strip()))


def _frozen(areas: Mapping[str, Sequence[str]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((area, tuple(items)) for area, items in areas.items())


@functools.lru_cache(maxsize=32)
def _word_patterns(
    areas: tuple[tuple[str, tuple[str, ...]], ...],
) -> tuple[tuple[str, re.Pattern[str]], ...]:
    compiled = []
    for area, phrases in areas:
        words = [" ".join(_WORD.findall(p.lower())) for p in phrases]
        alternatives = "|".join(re.escape(w) for w in words if w)
        if alternatives:
            # A plural stands for its word ("invoices", "refunds"); nothing else does.
            compiled.append(
                (area, re.compile(rf"(?<![a-z0-9])(?:{alternatives})(?:e?s)?(?![a-z0-9])"))
            )
    return tuple(compiled)


def subject_areas(subject: str, areas: Mapping[str, Sequence[str]]) -> list[str]:
    """The areas whose words (or phrases) stand as whole words (or their plurals) in a subject:
    "Fix the login form" is auth; "authored", "CaptureMode" and "payload" are not."""
    if is_dependency_subject(subject):
        return []
    text = " ".join(_WORD.findall(subject.lower().replace("_", " ")))
    return sorted(area for area, pattern in _word_patterns(_frozen(areas)) if pattern.search(text))


@functools.lru_cache(maxsize=32)
def _glob_patterns(
    areas: tuple[tuple[str, tuple[str, ...]], ...],
) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple(
        (area, re.compile("|".join(fnmatch.translate(g.lower()) for g in globs)))
        for area, globs in areas
        if globs
    )


def path_area_matches(path: str, area_paths: Mapping[str, Sequence[str]]) -> list[str]:
    lowered = path.lower()
    return sorted(
        area for area, pattern in _glob_patterns(_frozen(area_paths)) if pattern.match(lowered)
    )


@dataclass(frozen=True, slots=True)
class FileTouch:
    path: str
    added: int
    deleted: int
    old_path: str = ""
    # What the git reader found (detective_client/generated.py); False from an older client.
    generated: bool = False
    vendored: bool = False
    # The commit deleted the file (git's status D).
    removed: bool = False

    @property
    def kind(self) -> FileKind:
        return file_kind(self.path, generated=self.generated, vendored=self.vendored)

    @property
    def lines(self) -> int:
        return self.added + self.deleted


@dataclass(frozen=True, slots=True)
class CommitFacts:
    """One commit as the policy reads it."""

    sha: str
    subject: str
    author: str
    kind: CommitKind
    bot: bool
    breaking: bool
    files: tuple[FileTouch, ...] = ()

    @property
    def code_files(self) -> tuple[FileTouch, ...]:
        return tuple(f for f in self.files if f.kind in CODE_KINDS)

    @property
    def named(self) -> str:
        return f'{self.sha[:7]} "{self.subject}"' if self.sha else f'"{self.subject}"'


def commit_kind(subject: str, parents: int, kinds: Sequence[FileKind], bot: bool) -> CommitKind:
    if parents > 1:
        return "merge"
    if _REVERT.match(subject):
        return "revert"
    kinds_set = set(kinds)
    if (
        kinds_set
        and kinds_set <= DEPENDENCY_KINDS | {"ci"}
        and (kinds_set & DEPENDENCY_KINDS or bot)
    ):
        return "dependencies"
    if bot and is_dependency_subject(subject):
        return "dependencies"
    if kinds_set and kinds_set <= {"ci", "config"}:
        return "ci"
    if kinds_set and kinds_set <= {"docs", "asset", "example", "translation"}:
        return "docs"
    if kinds_set and kinds_set <= {"test", "docs"}:
        return "tests"
    return "code"


def commit_facts(
    *,
    sha: str,
    author_name: str,
    author_email: str,
    message: str,
    parents: int,
    files: Iterable[FileTouch | tuple[str, int | None, int | None, str]],
) -> CommitFacts:
    """A commit's facts from what git says of it: files as `FileTouch`es, or as (path, added,
    deleted, old path) when the reader knows no more of them."""
    subject, _, _ = split_trailers(message)
    touches = tuple(
        f
        if isinstance(f, FileTouch)
        else FileTouch(path=f[0], added=f[1] or 0, deleted=f[2] or 0, old_path=f[3] or "")
        for f in files
    )
    bot = is_bot(author_name, author_email, message)
    return CommitFacts(
        sha=sha,
        subject=subject,
        author=author_name or author_email,
        kind=commit_kind(subject, parents, [t.kind for t in touches], bot),
        bot=bot,
        breaking=is_breaking(message),
        files=touches,
    )


__all__ = [
    "CODE_KINDS",
    "CommitFacts",
    "CommitKind",
    "FileKind",
    "FileTouch",
    "commit_facts",
    "commit_kind",
    "file_kind",
    "is_bot",
    "is_breaking",
    "is_dependency_subject",
    "path_area_matches",
    "split_trailers",
    "subject_areas",
]
