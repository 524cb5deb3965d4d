"""A release's history (`risk.history.History`) read from the detail tables.
Over 600 lines: its four parts share the earlier releases' rows and one set of bounds, read
together in a fixed number of queries; the carried commits are apart (`earlier_commits.py`).

Every read is a fixed number of queries, whatever the number of tests, commits or releases
(no query per test or per release), and each is bounded: at most MAX_TESTS tests get a history,
at most MAX_MESSAGES commit messages and MAX_SAMPLES samples per metric and window are kept.
The policy's verdict on a stored release reads it through `sources.judging.judge_release`.

The parts are public for the agent's drill-downs: `earlier`, `test_histories`, `change_facts`,
`metric_series`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from django.db.models import (
    BooleanField,
    Case,
    F,
    IntegerField,
    Q,
    QuerySet,
    TextField,
    Value,
    When,
    Window,
)
from django.db.models.functions import Coalesce, DenseRank

from releases.models import Release
from releases.release_order import earlier_releases
from risk.changes import CODE_KINDS, FileTouch, commit_facts, file_kind
from risk.history import (
    AuthorFacts,
    ChangeFacts,
    FileChange,
    History,
    MetricSeries,
    ReleaseRef,
    TestHistory,
    TestOutcome,
)
from risk.settings import PolicySettings
from risk.suspects import Suspect
from sources.earlier_commits import EarlierCommits
from sources.models import Commit, CommitFile, MetricWindow, TestCase, TestStatus
from sources.summary import names_for, windows_series

DEFAULT_WINDOW = 10
MAX_TESTS = 200
MAX_MESSAGES = 200
MESSAGE_CHARS = 1000
MAX_SAMPLES = 5000
# The earlier (author, path) pairs read to tell who is new to what.
MAX_EARLIER_PATHS = 50_000

# How pytest's JUnit XML says a fixture broke before the test ran: an <error> whose message is
# 'failed on setup with "..."' (the test's own failure is a <failure>).
SETUP_ERROR = "failed on setup"
_FAILING = (TestStatus.FAILED, TestStatus.ERROR)
_FAILED_ONCE = (TestStatus.FAILED, TestStatus.ERROR, TestStatus.FLAKY)
_OF_INTEREST = (*_FAILED_ONCE, TestStatus.SKIPPED)
_SKIPPED_ONLY = Case(
    When(status=TestStatus.SKIPPED, then=Value(1)), default=Value(0), output_field=IntegerField()
)


def read_history(
    release: Release,
    *,
    window: int = DEFAULT_WINDOW,
    refs: Sequence[ReleaseRef] | None = None,
    settings: PolicySettings | None = None,
    carried: EarlierCommits | None = None,
) -> History:
    """Everything the policy reads of the release's past, over the service's last `window`
    releases (`refs`, when the caller read them already; `settings`: the policy in force, for
    the service's metric names). Five queries at most: the earlier releases (unless given),
    the tests failing here (or whether there are tests), their history, the commits with their
    files (this release's, the window's, and the same authors' earlier ones), and the metric
    samples of both windows and of the window's releases. `carried`: the earlier releases'
    commits, kept by a caller that walks the releases in order (the backtest); the same
    authors' earlier commits are taken from it, one query of ids more, when it holds exactly
    the earlier releases."""
    refs = list(refs) if refs is not None else earlier(release, window)
    changes, renames = _change_facts_and_renames(release, refs, carried)
    tests, has_tests = test_histories(release, window=window, refs=refs, renames=renames)
    return History(
        service=release.service.name,
        version=release.version,
        previous=tuple(refs),
        tests=tests,
        changes=changes,
        metrics=metric_series(release, window=window, refs=refs, settings=settings),
        window=window,
        has_test_detail=has_tests,
    )


def earlier(release: Release, window: int = DEFAULT_WINDOW) -> list[ReleaseRef]:
    """The service's last `window` releases before this one, most recent first."""
    rows = earlier_releases(release).values_list("id", "version", "order_at")[: max(window, 0)]
    return [ReleaseRef(id=pk, version=version, at=at) for pk, version, at in rows]


def _earlier_ids(release: Release) -> QuerySet[Release]:
    return earlier_releases(release).order_by().values("id")


def _label(classname: str, name: str) -> str:
    return f"{classname}::{name}" if classname else name


def _split(label: str) -> tuple[str, str]:
    classname, _, name = label.rpartition("::")
    return classname, name


def _outcome(statuses: Iterable[str]) -> TestOutcome | None:
    """How a test went in one release, from all its attempts there: None when only skipped."""
    seen = set(statuses)
    failed = bool(seen & set(_FAILED_ONCE))
    passed = bool(seen & {TestStatus.PASSED, TestStatus.FLAKY})
    if failed and passed:
        return "flaky"
    if failed:
        return "failed"
    return "passed" if passed else None


def test_histories(
    release: Release,
    *,
    window: int = DEFAULT_WINDOW,
    labels: Sequence[str] | None = None,
    refs: Sequence[ReleaseRef] | None = None,
    renames: Sequence[tuple[str, str]] | None = None,
) -> tuple[tuple[TestHistory, ...], bool]:
    """The history of the named tests (`classname::name`), or of the tests that failed at
    least once in this release, then those skipped, when none are named (at most MAX_TESTS,
    by label); and whether the release has test results at all. `renames`: the release's
    renamed test files, when the caller read them already (`_test_renames`)."""
    own = TestCase.objects.filter(release=release)
    refs = list(refs) if refs is not None else earlier(release, window)
    versions = {ref.id: ref.version for ref in refs}
    if labels is None:
        # The failing ones, then the skipped ones, for the policy's "newly skipped"
        # (risk/history_signals.py): failures first, so a suite skipped whole never crowds
        # them out. Their names are a subquery of the one query below (the summary's budget is
        # 6 queries): the first MAX_TESTS (skipped_only, classname, name) by a dense rank.
        ranked = (
            own.filter(status__in=_OF_INTEREST)
            .annotate(
                rank=Window(
                    DenseRank(),
                    order_by=[_SKIPPED_ONLY.asc(), F("classname").asc(), F("name").asc()],
                )
            )
            .filter(rank__lte=MAX_TESTS)
            .values("name")
        )
        named: Q = Q(name__in=ranked)
        # Whether the release has test results at all: any one of its rows.
        any_own: Q = Q(pk__in=own.order_by().values("pk")[:1])
    else:
        given = [_split(label) for label in labels[:MAX_TESTS]]
        if not given:
            return (), own.exists()
        named, any_own = Q(name__in=sorted({name for _, name in given})), Q(pk__in=[])
    # One query: every attempt here at the tests of interest (last one last), their results in
    # the window's releases and their failures over the service's whole past (for the first
    # release each failed in); and one row of the release's own, whatever it is.
    rows = list(
        TestCase.objects.filter(
            (
                Q(release_id=release.pk)
                | Q(release_id__in=list(versions))
                | Q(release_id__in=_earlier_ids(release), status__in=_FAILED_ONCE)
            )
            & named
            | any_own
        )
        .annotate(
            order_at=Coalesce("release__deployed_at", "release__created_at"),
            # pytest writes a fixture's error as "failed on setup with ...".
            setup=Case(
                When(status=TestStatus.ERROR, failure_message__startswith=SETUP_ERROR, then=True),
                default=False,
                output_field=BooleanField(),
            ),
        )
        .order_by("attempt", "id")
        .values_list(
            "release_id",
            "suite",
            "classname",
            "name",
            "file",
            "status",
            "release__version",
            "order_at",
            "suspects",
            "setup",
        )
    )
    has_tests = any(row[0] == release.pk for row in rows)
    if labels is None:
        # The same selection as the rank above, made here from the rows it let through.
        of_interest = sorted(
            {
                (status == TestStatus.SKIPPED, row_classname, row_name)
                for row_id, _, row_classname, row_name, _, status, *_ in rows
                if row_id == release.pk and status in _OF_INTEREST
            }
        )
        wanted = list(dict.fromkeys((c, n) for _, c, n in of_interest))[:MAX_TESTS]
    else:
        wanted = given
    if not wanted:
        return (), has_tests
    keys = set(wanted)
    # A test file renamed in the range keeps its tests' history: their earlier results are
    # read under the old file's classname too ("tests.test_old.T" for "tests.test_new.T").
    renames = list(renames) if renames is not None else _test_renames(release)
    alias = {
        (old, name): (classname, name)
        for classname, name in wanted
        if renames and (old := _renamed_from(classname, renames)) is not None
    }
    # Each stored (classname, name) of interest -> the wanted key it counts for.
    counts_for = {**{key: key for key in keys}, **alias}

    attempts: dict[tuple[str, str], list[str]] = defaultdict(list)
    where: dict[tuple[str, str], tuple[str, str]] = {}
    # The suspects of its last failing attempt that has them (sources/services/suspects.py).
    suspects_of: dict[tuple[str, str], tuple[Suspect, ...]] = {}
    computed: set[tuple[str, str]] = set()
    recent: dict[tuple[str, str], dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    failed_in: dict[tuple[str, str], set[int]] = defaultdict(set)
    order: dict[int, tuple[Any, int, str]] = {}
    setup_errors: set[tuple[str, str]] = set()
    for release_id, suite, classname, name, file, status, version, at, suspects, setup in rows:
        stored = (classname, name)
        if release_id == release.pk:
            if stored in keys:
                attempts[stored].append(status)
                if setup:
                    setup_errors.add(stored)
                where.setdefault(stored, (suite, file))
                if suspects is not None and status in _FAILING:
                    computed.add(stored)
                if suspects and suspects.get("ranked") and status in _FAILING:
                    suspects_of[stored] = tuple(Suspect(**s) for s in suspects["ranked"])
            continue
        key = counts_for.get(stored)
        if key is None:
            continue
        if release_id in versions:
            recent[key][release_id].append(status)
        if status in _FAILED_ONCE:
            failed_in[key].add(release_id)
            order[release_id] = (at, release_id, version)

    histories = []
    for key in sorted(keys, key=lambda k: _label(*k)):
        statuses = attempts.get(key, [])
        here = _outcome(statuses)
        last = statuses[-1] if statuses else None
        outcome: TestOutcome
        if last in _FAILING:
            outcome = "failed"
        elif last == TestStatus.SKIPPED or last is None:
            outcome = "skipped"
        elif here == "flaky":
            outcome = "flaky"
        else:
            outcome = "passed"
        before = [order[i] for i in failed_in.get(key, ()) if i in order]
        failed_here = here in ("failed", "flaky")
        first = min(before)[2] if before else (release.version if failed_here else None)
        history_here = []
        for ref in refs:
            went = _outcome(recent[key].get(ref.id, ()))
            if went is not None:
                history_here.append((ref.version, went))
        suite, file = where.get(key, ("", ""))
        histories.append(
            TestHistory(
                label=_label(*key),
                file=file,
                suite=suite,
                outcome=outcome,
                flaky_here=here == "flaky",
                first_failed_in=first,
                failed_before=bool(before),
                recent=tuple(history_here),
                suspects=suspects_of.get(key, ()),
                suspects_computed=key in computed,
                renamed_from=_renamed_file(key[0], renames) if key in alias.values() else "",
                failed_runs=sum(status in _FAILING for status in statuses),
                setup_error=last in _FAILING and key in setup_errors,
            )
        )
    return tuple(histories), True


def _test_renames(release: Release) -> list[tuple[str, str]]:
    """(old path, new path) of the test files git saw renamed in the release's commits."""
    return [
        (old, new)
        for old, new in CommitFile.objects.filter(commit__release=release)
        .exclude(old_path="")
        .values_list("old_path", "path")
        if file_kind(new) == "test" and old != new
    ]


def _module_forms(path: str) -> list[str]:
    """How a test file is named in a report's classname: its path ("tests/test_x.py", jest),
    without its suffix, and dotted ("tests.test_x", pytest and unittest)."""
    bare = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    return [path, bare, bare.replace("/", ".")]


def _renamed_from(classname: str, renames: Sequence[tuple[str, str]]) -> str | None:
    """The classname a test had before its file was renamed in this release, or None."""
    for old, new in renames:
        for old_form, new_form in zip(_module_forms(old), _module_forms(new), strict=True):
            if classname == new_form or classname.startswith(new_form + "."):
                return old_form + classname[len(new_form) :]
            # pytest run from a folder above the tests ("src.tests.test_x") or below them.
            if classname.endswith("." + new_form) or f".{new_form}." in f".{classname}.":
                return classname.replace(new_form, old_form, 1)
    return None


def _renamed_file(classname: str, renames: Sequence[tuple[str, str]]) -> str:
    """The old path of the renamed file a test's classname lives in, or ""."""
    for old, new in renames:
        if _renamed_from(classname, [(old, new)]) is not None:
            return old
    return ""


def _author_key(name: str, email: str) -> str:
    return email.strip().lower() or name.strip()


def change_facts(
    release: Release, *, refs: Sequence[ReleaseRef] | None = None
) -> ChangeFacts | None:
    """The release's change (merges left out): files with their lines, messages, and per author
    what they had touched before in the service; each commit with its kind (risk/changes.py);
    and the code size of the service's recent earlier releases. None without ingested commits."""
    refs = list(refs) if refs is not None else earlier(release)
    return _change_facts_and_renames(release, refs)[0]


# One row of the commits query: a commit with one of its files (None's without files).
_CommitRow = tuple[
    int,
    int,
    str,
    str,
    str,
    list[str] | None,
    str,
    str | None,
    int | None,
    int | None,
    bool | None,
    str | None,
    bool | None,
    bool | None,
    bool | None,
]


def _commit_rows(
    release: Release, refs: Sequence[ReleaseRef], *, authors: bool = True
) -> list[_CommitRow]:
    """In one query, each commit with each of its files: this release's; the window's (their
    code size); the same authors' in the service's earlier releases (what they touched before;
    not with `authors=False`, when the caller carries them); and one earlier commit of
    anyone's (whether the service has any)."""
    own = Commit.objects.filter(release_id=release.pk)
    earlier_ids = _earlier_ids(release)
    any_earlier = Commit.objects.filter(release_id__in=earlier_ids).values("pk")[:1]
    wanted = (
        Q(release_id=release.pk)
        | Q(release_id__in=[ref.id for ref in refs])
        | Q(pk__in=any_earlier)
    )
    if authors:
        theirs = Q(author_email__in=own.exclude(author_email="").values("author_email")) | Q(
            author_name__in=own.filter(author_email="").values("author_name")
        )
        wanted |= Q(release_id__in=earlier_ids) & theirs
    return list(
        Commit.objects.filter(wanted)
        # Only this release's messages are read; the others' would be dead weight.
        .annotate(
            own_message=Case(
                When(release_id=release.pk, then=F("message")),
                default=Value(""),
                output_field=TextField(),
            )
        )
        .order_by("authored_at", "sha", "files__id")
        .values_list(
            "id",
            "release_id",
            "author_name",
            "author_email",
            "own_message",
            "parents",
            "sha",
            "files__path",
            "files__added",
            "files__deleted",
            "files__binary",
            "files__old_path",
            "files__generated",
            "files__vendored",
            "files__removed",
        )
    )


def _carries_the_earlier(release: Release, carried: EarlierCommits | None) -> bool:
    if carried is None:
        return False
    return carried.releases == set(_earlier_ids(release).values_list("id", flat=True))


def _change_facts_and_renames(
    release: Release, refs: Sequence[ReleaseRef], carried: EarlierCommits | None = None
) -> tuple[ChangeFacts | None, list[tuple[str, str]]]:
    """`change_facts`, and the test files renamed in the release (`_test_renames`), from one
    query (`_commit_rows`); the same authors' earlier commits from `carried` when it holds
    exactly the earlier releases' (`sources.earlier_commits`)."""
    if not _carries_the_earlier(release, carried):
        carried = None
    rows = _commit_rows(release, refs, authors=carried is None)
    commits: dict[int, tuple[str, str, str, list[str] | None, str]] = {}
    per_commit: dict[int, list[FileTouch]] = defaultdict(list)
    renames: list[tuple[str, str]] = []
    window = {ref.id for ref in refs}
    window_rows = []
    earlier_rows = []
    for pk, release_id, name, email, message, parents, sha, path, *rest in rows:
        if release_id != release.pk:
            earlier_rows.append((pk, name, email, path))
            if release_id in window and path is not None:
                window_rows.append(
                    (release_id, path, rest[0], rest[1], parents, bool(rest[4]), bool(rest[5]))
                )
            continue
        commits.setdefault(pk, (name, email, message, parents, sha))
        if path is None:
            continue
        added, deleted, _, old_path, generated, vendored, removed = rest
        per_commit[pk].append(
            FileTouch(
                path=path,
                added=added or 0,
                deleted=deleted or 0,
                old_path=old_path or "",
                generated=bool(generated),
                vendored=bool(vendored),
                removed=bool(removed),
            )
        )
        if old_path and old_path != path and file_kind(path) == "test":
            renames.append((old_path, path))
    kept = {
        pk: (name, email, message)
        for pk, (name, email, message, parents, _) in commits.items()
        if len(parents or []) <= 1
    }
    if not kept:
        return None, renames
    lines: dict[str, list[int]] = {}
    binary: set[str] = set()
    generated: set[str] = set()
    vendored: set[str] = set()
    by_author: dict[str, set[str]] = defaultdict(set)
    commit_count: dict[str, int] = defaultdict(int)
    display: dict[str, str] = {}
    for name, email, _ in kept.values():
        key = _author_key(name, email)
        commit_count[key] += 1
        display.setdefault(key, name or email)
    for pk, path, added, deleted, is_binary, _, is_generated, is_vendored in (
        (pk, *row) for pk, *row in _own_files(rows, release.pk) if pk in kept
    ):
        counted = lines.setdefault(path, [0, 0])
        counted[0] += added or 0
        counted[1] += deleted or 0
        if is_binary:
            binary.add(path)
        if is_generated:
            generated.add(path)
        if is_vendored:
            vendored.add(path)
        name, email, _ = kept[pk]
        by_author[_author_key(name, email)].add(path)
    files = tuple(
        FileChange(
            path=path,
            added=a,
            deleted=d,
            binary=path in binary,
            generated=path in generated,
            vendored=path in vendored,
        )
        for path, (a, d) in sorted(lines.items())
    )
    messages = tuple(message[:MESSAGE_CHARS] for _, _, message in kept.values())[:MAX_MESSAGES]

    emails = {email for _, email, _ in kept.values() if email}
    names_only = {name for name, email, _ in kept.values() if not email}
    if carried is not None:
        theirs = carried.rows_for(emails, names_only)
        if len(theirs) >= MAX_EARLIER_PATHS:
            # The cap on paths below keeps the first ones in the query's order, which the
            # carried rows do not keep: the database's way, exactly.
            return _change_facts_and_renames(release, refs)
        earlier_rows += theirs
    touched: dict[str, set[str]] = defaultdict(set)
    their_commits: dict[str, set[int]] = defaultdict(set)
    for pk, name, email, path in earlier_rows:
        if email not in emails and name not in names_only:
            continue
        key = _author_key(name, email)
        their_commits[key].add(pk)
        if path is not None and len(touched[key]) < MAX_EARLIER_PATHS:
            touched[key].add(path)
    authors = []
    for key in sorted(commit_count):
        theirs = sorted(by_author.get(key, ()))
        known_dirs = {FileChange(p, 0, 0).directory for p in touched.get(key, ())}
        new_files = tuple(p for p in theirs if p not in touched.get(key, set()))
        new_dirs = sorted({FileChange(p, 0, 0).directory for p in theirs} - known_dirs)
        authors.append(
            AuthorFacts(
                author=display[key],
                commits=commit_count[key],
                files=tuple(theirs),
                new_files=new_files,
                new_directories=tuple(new_dirs),
                earlier_commits=len(their_commits.get(key, ())),
            )
        )
    commit_list = tuple(
        commit_facts(
            sha=sha,
            author_name=name,
            author_email=email,
            message=message,
            parents=len(parents or []),
            files=per_commit.get(pk, ()),
        )
        for pk, (name, email, message, parents, sha) in commits.items()
    )
    facts = ChangeFacts(
        commits=len(kept),
        files=files,
        messages=messages,
        authors=tuple(authors),
        service_has_earlier_commits=bool(earlier_rows),
        commit_list=commit_list,
        earlier_code_sizes=_earlier_code_sizes(refs, window_rows),
    )
    return facts, renames


def _own_files(
    rows: Sequence[_CommitRow], release_id: int
) -> Iterable[tuple[int, str, int | None, int | None, bool | None, str | None, bool, bool]]:
    for pk, owner, _, _, _, _, _, path, added, deleted, is_binary, old_path, *flags in rows:
        if owner == release_id and path is not None:
            yield pk, path, added, deleted, is_binary, old_path, bool(flags[0]), bool(flags[1])


def _earlier_code_sizes(
    refs: Sequence[ReleaseRef],
    rows: Iterable[tuple[int, str, int | None, int | None, list[str] | None, bool, bool]],
) -> tuple[tuple[int, int, int], ...]:
    """(code lines, code files, code directories) of each earlier release with commits, most
    recent first: what "large for this service" is judged against (merges left out); `rows`:
    (release, path, added, deleted, parents, generated, vendored) of the refs' commit files."""
    lines: dict[int, int] = defaultdict(int)
    files: dict[int, set[str]] = defaultdict(set)
    for release_id, path, added, deleted, parents, generated, vendored in rows:
        kind = file_kind(path, generated=generated, vendored=vendored)
        if len(parents or []) > 1 or kind not in CODE_KINDS:
            continue
        lines[release_id] += (added or 0) + (deleted or 0)
        files[release_id].add(path)
    return tuple(
        (
            lines[ref.id],
            len(files[ref.id]),
            len({FileChange(p, 0, 0).directory for p in files[ref.id]}),
        )
        for ref in refs
        if ref.id in files
    )


def metric_series(
    release: Release,
    *,
    window: int = DEFAULT_WINDOW,
    names: Sequence[str] | None = None,
    refs: Sequence[ReleaseRef] | None = None,
    settings: PolicySettings | None = None,
) -> tuple[MetricSeries, ...]:
    """Per summary metric (`error_rate`, `response_time_p95`) its series in this release's
    window, its baseline window, and the release windows of the service's last `window`
    releases, read the way Prometheus means the samples (`sources.summary.window_series`:
    counters as rates, histograms as quantiles, gauges as they are), so that the judge
    compares what the summary's figure is made of, never a cumulative counter. One query
    (with `refs` given); `settings`: the policy in force, read when not given."""
    summary_names = names_for(release.service.slug, settings)
    refs = list(refs) if refs is not None else earlier(release, window)
    own, earlier_series = windows_series(release.pk, [ref.id for ref in refs], summary_names)
    metric_names = sorted(set(own[MetricWindow.RELEASE]) | set(own[MetricWindow.BASELINE]))
    if names is not None:
        metric_names = [name for name in metric_names if name in names]
    if not metric_names:
        return ()
    return tuple(
        MetricSeries(
            name=name,
            release=tuple(own[MetricWindow.RELEASE].get(name, ())[:MAX_SAMPLES]),
            baseline=tuple(own[MetricWindow.BASELINE].get(name, ())[:MAX_SAMPLES]),
            recent=tuple(
                (ref.version, tuple(earlier_series[ref.id][name][:MAX_SAMPLES]))
                for ref in refs
                if earlier_series[ref.id].get(name)
            ),
        )
        for name in metric_names
    )
