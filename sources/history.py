"""A release's history (`risk.history.History`) read from the detail tables.

Every read is a fixed number of queries, whatever the number of tests, commits or releases
(no query per test or per release), and each is bounded: at most MAX_TESTS tests get a history,
at most MAX_MESSAGES commit messages and MAX_SAMPLES samples per metric and window are kept.
`SourcesConfig.ready` installs `read_history` as the releases app's history reader
(releases/history_hooks.py).

The parts are public for the agent's drill-downs: `earlier`, `test_histories`, `change_facts`,
`metric_series`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from django.db.models import Count, Q, QuerySet

from releases.models import Release
from releases.release_order import earlier_releases, in_release_order
from risk.changes import CODE_KINDS, commit_facts, file_kind
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
from risk.suspects import Suspect
from sources.models import Commit, CommitFile, MetricWindow, TestCase, TestStatus
from sources.summary import names_for, window_series

DEFAULT_WINDOW = 10
MAX_TESTS = 200
MAX_MESSAGES = 200
MESSAGE_CHARS = 1000
MAX_SAMPLES = 5000
# The earlier (author, path) pairs read to tell who is new to what.
MAX_EARLIER_PATHS = 50_000

_FAILING = (TestStatus.FAILED, TestStatus.ERROR)
_FAILED_ONCE = (TestStatus.FAILED, TestStatus.ERROR, TestStatus.FLAKY)


def read_history(release: Release, *, window: int = DEFAULT_WINDOW) -> History:
    """Everything the policy reads of the release's past, over the service's last `window`
    releases."""
    refs = earlier(release, window)
    tests, has_tests = test_histories(release, window=window, refs=refs)
    return History(
        service=release.service.name,
        version=release.version,
        previous=tuple(refs),
        tests=tests,
        changes=change_facts(release, refs=refs),
        metrics=metric_series(release, window=window, refs=refs),
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
) -> tuple[tuple[TestHistory, ...], bool]:
    """The history of the named tests (`classname::name`), or of the tests that failed at
    least once in this release, then those skipped, when none are named (at most MAX_TESTS,
    by label); and whether
    the release has test results at all."""
    own = TestCase.objects.filter(release=release)
    if labels is None:
        wanted = list(
            own.filter(status__in=_FAILED_ONCE)
            .order_by("classname", "name")
            .values_list("classname", "name")
            .distinct()[:MAX_TESTS]
        )
        # Then the skipped ones, for the policy's "newly skipped" (risk/history_signals.py);
        # failures first, so a suite skipped whole never crowds them out.
        wanted += [
            key
            for key in own.filter(status=TestStatus.SKIPPED)
            .order_by("classname", "name")
            .values_list("classname", "name")
            .distinct()[: MAX_TESTS - len(wanted)]
            if key not in set(wanted)
        ]
    else:
        wanted = [_split(label) for label in labels[:MAX_TESTS]]
    if not wanted:
        return (), own.exists()
    names = sorted({name for _, name in wanted})
    keys = set(wanted)
    # A test file renamed in the range keeps its tests' history: their earlier results are
    # read under the old file's classname too ("tests.test_old.T" for "tests.test_new.T").
    renames = _test_renames(release)
    alias = {
        (old, name): (classname, name)
        for classname, name in wanted
        if renames and (old := _renamed_from(classname, renames)) is not None
    }
    # Each stored (classname, name) of interest -> the wanted key it counts for.
    counts_for = {**{key: key for key in keys}, **alias}

    # This release: every attempt, last one last.
    attempts: dict[tuple[str, str], list[str]] = defaultdict(list)
    where: dict[tuple[str, str], tuple[str, str]] = {}
    # The suspects of its last failing attempt that has them (sources/services/suspects.py).
    suspects_of: dict[tuple[str, str], tuple[Suspect, ...]] = {}
    for suite, classname, name, file, status, suspects in (
        own.filter(name__in=names)
        .order_by("attempt", "id")
        .values_list("suite", "classname", "name", "file", "status", "suspects")
    ):
        key = (classname, name)
        if key in keys:
            attempts[key].append(status)
            where.setdefault(key, (suite, file))
            if suspects and suspects.get("ranked") and status in _FAILING:
                suspects_of[key] = tuple(Suspect(**s) for s in suspects["ranked"])

    refs = list(refs) if refs is not None else earlier(release, window)
    versions = {ref.id: ref.version for ref in refs}
    recent: dict[tuple[str, str], dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for release_id, classname, name, status in TestCase.objects.filter(
        release_id__in=list(versions), name__in=names
    ).values_list("release_id", "classname", "name", "status"):
        if (classname, name) in counts_for:
            recent[counts_for[(classname, name)]][release_id].append(status)

    # The first release each test failed in, over the service's whole past.
    failed_in: dict[tuple[str, str], set[int]] = defaultdict(set)
    for classname, name, release_id in (
        TestCase.objects.filter(
            release_id__in=_earlier_ids(release), name__in=names, status__in=_FAILED_ONCE
        )
        .values_list("classname", "name", "release_id")
        .distinct()
    ):
        if (classname, name) in counts_for:
            failed_in[counts_for[(classname, name)]].add(release_id)
    order = {
        pk: (at, pk, version)
        for pk, version, at in in_release_order(
            Release.objects.filter(id__in={i for ids in failed_in.values() for i in ids})
        ).values_list("id", "version", "order_at")
    }

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


def _author_key(name: str, email: str) -> str:
    return email.strip().lower() or name.strip()


def change_facts(
    release: Release, *, refs: Sequence[ReleaseRef] | None = None
) -> ChangeFacts | None:
    """The release's change (merges left out): files with their lines, messages, and per author
    what they had touched before in the service; each commit with its kind (risk/changes.py);
    and the code size of the service's recent earlier releases. None without ingested commits."""
    commits = list(
        Commit.objects.filter(release=release)
        .order_by("authored_at", "sha")
        .values_list("id", "author_name", "author_email", "message", "parents", "sha")
    )
    kept = {
        pk: (name, email, message)
        for pk, name, email, message, parents, _ in commits
        if len(parents or []) <= 1
    }
    if not kept:
        return None
    lines: dict[str, list[int]] = {}
    binary: set[str] = set()
    by_author: dict[str, set[str]] = defaultdict(set)
    commit_count: dict[str, int] = defaultdict(int)
    display: dict[str, str] = {}
    for name, email, _ in kept.values():
        key = _author_key(name, email)
        commit_count[key] += 1
        display.setdefault(key, name or email)
    per_commit: dict[int, list[tuple[str, int | None, int | None, str]]] = defaultdict(list)
    for commit_id, path, added, deleted, is_binary, old_path in CommitFile.objects.filter(
        commit_id__in=list(kept)
    ).values_list("commit_id", "path", "added", "deleted", "binary", "old_path"):
        per_commit[commit_id].append((path, added, deleted, old_path))
        counted = lines.setdefault(path, [0, 0])
        counted[0] += added or 0
        counted[1] += deleted or 0
        if is_binary:
            binary.add(path)
        name, email, _ = kept[commit_id]
        by_author[_author_key(name, email)].add(path)
    files = tuple(
        FileChange(path=path, added=a, deleted=d, binary=path in binary)
        for path, (a, d) in sorted(lines.items())
    )
    messages = tuple(message[:MESSAGE_CHARS] for _, _, message in kept.values())[:MAX_MESSAGES]

    earlier_ids = _earlier_ids(release)
    emails = {email for _, email, _ in kept.values() if email}
    names_only = {name for name, email, _ in kept.values() if not email}
    by_them = Q(commit__author_email__in=emails) | Q(commit__author_name__in=names_only)
    touched: dict[str, set[str]] = defaultdict(set)
    for name, email, path in (
        CommitFile.objects.filter(by_them, commit__release_id__in=earlier_ids)
        .values_list("commit__author_name", "commit__author_email", "path")
        .distinct()[:MAX_EARLIER_PATHS]
    ):
        touched[_author_key(name, email)].add(path)
    earlier_commits: dict[str, int] = defaultdict(int)
    for name, email, count in (
        Commit.objects.filter(
            Q(author_email__in=emails) | Q(author_name__in=names_only),
            release_id__in=earlier_ids,
        )
        .values_list("author_name", "author_email")
        .annotate(n=Count("id"))
        .order_by()
    ):
        earlier_commits[_author_key(name, email)] += count
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
                earlier_commits=earlier_commits.get(key, 0),
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
        for pk, name, email, message, parents, sha in commits
    )
    refs = list(refs) if refs is not None else earlier(release)
    return ChangeFacts(
        commits=len(kept),
        files=files,
        messages=messages,
        authors=tuple(authors),
        service_has_earlier_commits=Commit.objects.filter(release_id__in=earlier_ids).exists(),
        commit_list=commit_list,
        earlier_code_sizes=_earlier_code_sizes(refs),
    )


def _earlier_code_sizes(refs: Sequence[ReleaseRef]) -> tuple[tuple[int, int, int], ...]:
    """(code lines, code files, code directories) of each earlier release with commits, most
    recent first: what "large for this service" is judged against (merges left out)."""
    lines: dict[int, int] = defaultdict(int)
    files: dict[int, set[str]] = defaultdict(set)
    for release_id, path, added, deleted, parents in (
        CommitFile.objects.filter(commit__release_id__in=[ref.id for ref in refs])
        .values_list("commit__release_id", "path", "added", "deleted", "commit__parents")
        .iterator(chunk_size=5000)
    ):
        if len(parents or []) > 1 or file_kind(path) not in CODE_KINDS:
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
) -> tuple[MetricSeries, ...]:
    """Per summary metric (`error_rate`, `response_time_p95`) its series in this release's
    window, its baseline window, and the release windows of the service's last `window`
    releases, read the way Prometheus means the samples (`sources.summary.window_series`:
    counters as rates, histograms as quantiles, gauges as they are), so that the judge
    compares what the summary's figure is made of, never a cumulative counter."""
    summary_names = names_for(release.service.slug)
    own = {
        which: window_series([release.pk], which, summary_names)[release.pk]
        for which in MetricWindow.values
    }
    metric_names = sorted(set(own[MetricWindow.RELEASE]) | set(own[MetricWindow.BASELINE]))
    if names is not None:
        metric_names = [name for name in metric_names if name in names]
    if not metric_names:
        return ()
    refs = list(refs) if refs is not None else earlier(release, window)
    earlier_series = window_series([ref.id for ref in refs], MetricWindow.RELEASE, summary_names)
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
