"""Reads of the sources app."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum
from django.http import QueryDict

from releases.models import Release
from risk.history_signals import judge_metrics
from risk.judge import Judgement, MetricJudgement, MetricSettings, judge_metric, written
from risk.settings import LEVEL_RANK
from sources import judging
from sources.models import (
    ChangeType,
    Commit,
    CommitFile,
    IngestionToken,
    MetricSample,
    TestCase,
    TestStatus,
)

# A window's own figure is stored beside its samples under this suffix (services/metrics.py).
WINDOW_SUFFIX = ":window"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_for(token: str) -> IngestionToken | None:
    """The live ingestion token whose SHA-256 this is, or None."""
    if not token or len(token) > 200:
        return None
    return (
        IngestionToken.objects.select_related("service")
        .filter(token_hash=hash_token(token), revoked=False)
        .first()
    )


@dataclass(frozen=True)
class TokenScope:
    """What a bearer token may read of the release API (sources/release_api.py)."""

    name: str  # what the token is called, for an error message
    service_id: int | None  # the one service it may read; None: every service
    service_name: str = ""


def token_scope(token: str) -> TokenScope | None:
    """An ingestion token's scope for the verdict API: a CI job reads its release's verdict
    with the token it sent the release with."""
    found = token_for(token)
    if found is None:
        return None
    return TokenScope(
        name=found.name,
        service_id=found.service_id,
        service_name=found.service.name if found.service is not None else "",
    )


# ---- a release's detail, for its page (sources/release_page.py) -----------------------------

TABS = ("tests", "commits", "metrics")
TAB_LABELS = {"tests": "Test cases", "commits": "Commits", "metrics": "Metrics"}
TESTS_PER_PAGE = 50
COMMITS_PER_PAGE = 25
FILES_PER_COMMIT = 20
ALL = "all"
STATUS_FILTERS = (ALL, *TestStatus.values)


@dataclass(frozen=True)
class SectionsQuery:
    """What the page asks for: one tab, its filters and its page (unknown values: the default)."""

    tab: str = ""
    status: str = ""
    search: str = ""
    change_type: str = ""
    page: str = "1"
    # One commit by its sha or a prefix of it (a failure's suspect links to it).
    sha: str = ""

    @classmethod
    def of(cls, query: QueryDict) -> SectionsQuery:
        tab, status, change_type = (
            query.get("tab", ""),
            query.get("status", ""),
            query.get("type", ""),
        )
        return cls(
            tab=tab if tab in TABS else "",
            status=status if status in STATUS_FILTERS else "",
            search=query.get("q", "").strip()[:200],
            change_type=change_type if change_type in ChangeType.values else "",
            page=query.get("page", "1")[:12],
            sha=sha if re.fullmatch(r"[0-9a-f]{4,64}", sha := query.get("sha", "")) else "",
        )


@dataclass(frozen=True)
class MetricRow:
    """One summary metric: its release window against its baseline's, the judge's sentence,
    and what the policy's signals on it said (the same judgement the report carries)."""

    judgement: MetricJudgement
    release_median: str | None
    baseline_median: str | None
    # The window's figure, as the summary gives it (an instant query over the whole window
    # from Prometheus; from a file, the counters' rate and the histogram's quantile over it).
    release_figure: str | None
    baseline_figure: str | None
    missing: int  # samples without a value (NaN, Inf): left out of the judgement
    # The policy's level for this metric ("none" ... "high") and its signals' sentences.
    level: str = "none"
    reasons: tuple[str, ...] = ()

    @property
    def outcome(self) -> str:
        """What the Judged column says: never "pass" beside a signal that raised it."""
        if self.level != "none":
            return f"rose · {self.level}"
        return self.judgement.outcome.replace("_", " ")


@dataclass(frozen=True)
class MetricsView:
    """The Metrics tab's overall line, and what a reader must know of its windows."""

    level: str
    sentence: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReleaseSections:
    tab: str  # the tab shown; "" when the release has no detail at all
    query: SectionsQuery
    status: str  # the status filter in force (the default: failures when there are any)
    status_counts: dict[str, int]  # test case attempts by status
    test_count: int
    commit_count: int
    sample_count: int
    tests: Page[TestCase] | None = None
    commits: Page[Commit] | None = None
    metrics: list[MetricRow] = field(default_factory=list)
    judgement: MetricsView | None = None

    @property
    def change_types(self) -> list[str]:
        return list(ChangeType.values)

    @property
    def tab_links(self) -> list[tuple[str, str, int]]:
        """(tab, label, how many) for the tabs with something in them, and the one shown."""
        counts = {"tests": self.test_count, "commits": self.commit_count}
        counts["metrics"] = self.sample_count
        return [
            (name, TAB_LABELS[name], counts[name])
            for name in TABS
            if counts[name] or name == self.tab
        ]

    @property
    def status_choices(self) -> list[tuple[str, str, int]]:
        """(status, label, attempts) for the status filter."""
        return [
            (ALL, "All", self.test_count),
            *(
                (value, str(label), self.status_counts.get(value, 0))
                for value, label in TestStatus.choices
            ),
        ]


def release_sections(release: Release, query: QueryDict) -> ReleaseSections:
    """The counts of each kind of detail, and one page of the tab asked for (the first with
    something in it by default). Bounded queries whatever the size: counts over indexes and
    one page of rows."""
    wanted = SectionsQuery.of(query)
    status_counts = dict(
        TestCase.objects.filter(release=release)
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    test_count = sum(status_counts.values())
    commit_count, sample_count = (
        Release.objects.filter(pk=release.pk)
        .annotate(
            commit_count=_count_of(Commit.objects.filter(release=OuterRef("pk"))),
            sample_count=_count_of(MetricSample.objects.filter(release=OuterRef("pk"))),
        )
        .values_list("commit_count", "sample_count")
        .get()
    )
    present = {"tests": test_count, "commits": commit_count, "metrics": sample_count}
    tab = wanted.tab or next((name for name in TABS if present[name]), "")
    status = wanted.status or (TestStatus.FAILED if status_counts.get(TestStatus.FAILED) else ALL)
    sections = ReleaseSections(
        tab=tab,
        query=wanted,
        status=status,
        status_counts=status_counts,
        test_count=test_count,
        commit_count=commit_count,
        sample_count=sample_count,
    )
    if tab == "tests":
        return replace(sections, tests=test_page(release, status, wanted.search, wanted.page))
    if tab == "commits":
        return replace(
            sections, commits=commit_page(release, wanted.change_type, wanted.page, wanted.sha)
        )
    if tab == "metrics":
        judgement, rows = metric_rows(release)
        return replace(sections, metrics=rows, judgement=judgement)
    return sections


def _count_of(rows: QuerySet[Any]) -> Subquery:
    """The number of these rows, as a subquery (two counts in one query)."""
    return Subquery(
        rows.order_by().values("release").annotate(n=Count("pk")).values("n")[:1],
        output_field=IntegerField(),
    )


def test_page(release: Release, status: str, search: str, page: str) -> Page[TestCase]:
    """One page of a release's test case attempts, by status (ALL: any) and a part of the name
    or class; in the order of the index (release, status, suite, classname, name, attempt)."""
    cases = TestCase.objects.filter(release=release).defer("ingestion")
    if status != ALL:
        cases = cases.filter(status=status)
    if search:
        cases = cases.filter(Q(name__icontains=search) | Q(classname__icontains=search))
    return Paginator(
        cases.order_by("suite", "classname", "name", "invocation", "attempt"), TESTS_PER_PAGE
    ).get_page(page)


def commit_page(release: Release, change_type: str, page: str, sha: str = "") -> Page[Commit]:
    """One page of a release's commits, newest first, each with its lines added and deleted and
    its first files; only the one `sha` starts, when given."""
    commits = Commit.objects.filter(release=release)
    if sha:
        commits = commits.filter(sha__startswith=sha)
    if change_type:
        commits = commits.filter(change_type=change_type)
    commits = commits.annotate(
        lines_added=Sum("files__added"),
        lines_deleted=Sum("files__deleted"),
        file_count=Count("files"),
    ).prefetch_related(
        Prefetch(
            "files",
            queryset=CommitFile.objects.order_by("commit_id", "path")[:FILES_PER_COMMIT],
            to_attr="first_files",
        )
    )
    return Paginator(commits.order_by("-authored_at", "sha"), COMMITS_PER_PAGE).get_page(page)


# The policy's signals on each summary metric (risk/policy.py) and the judge's (history_signals).
METRIC_SIGNALS = {
    "error_rate": ("error_rate", "error_rate_change"),
    "response_time_p95": ("p95_latency", "p95_change"),
}
JUDGE_SIGNAL = "metric_judge"


def metric_rows(release: Release) -> tuple[MetricsView | None, list[MetricRow]]:
    """The summary's metrics as the policy judges them: each one's series (counters as rates,
    histograms as quantiles, `sources.summary.window_series`) in the release window against the
    baseline's, the policy's judge on them and its signals, so the tab says what the report
    says."""
    if not MetricSample.objects.filter(release=release).exists():
        return None, []
    judged = judging.judge_release(release)
    cfg = judged.settings
    judgement = judge_metrics(judged.history, cfg)
    settings = cfg.judge_settings()
    signals = {signal.name: signal for signal in judged.verdict.signals}
    figures = release.deployment_metrics or {}
    rows = []
    for key, names in METRIC_SIGNALS.items():
        metric = (judgement.metric(key) if judgement else None) or judge_metric(
            key, (), (), settings
        )
        unit = settings.for_metric(key)

        def text(value: Any, unit: MetricSettings = unit) -> str | None:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            return written(float(value), unit) if ok else None

        raised = [signals[n] for n in names if n in signals and signals[n].level != "none"]
        level = max((s.level for s in raised), key=LEVEL_RANK.__getitem__, default="none")
        if metric.outcome == "fail" and JUDGE_SIGNAL in signals:
            judge_level = signals[JUDGE_SIGNAL].level
            level = max(level, judge_level, key=LEVEL_RANK.__getitem__)
        rows.append(
            MetricRow(
                judgement=metric,
                release_median=text(metric.current.median),
                baseline_median=text(metric.baseline.median),
                release_figure=text(figures.get(key)),
                baseline_figure=text(figures.get(f"{key}_baseline")),
                missing=0,
                level=level,
                reasons=tuple(s.detail for s in raised),
            )
        )
    return _metrics_view(release, judgement, rows, signals.get(JUDGE_SIGNAL)), rows


def _metrics_view(
    release: Release, judgement: Judgement | None, rows: list[MetricRow], judge_signal: Any
) -> MetricsView:
    notes = []
    if release.deployed_at is None:
        notes.append(
            "The release has no deploy time: its samples were all taken as its own window, "
            "with no baseline, so nothing here is judged against a baseline."
        )
    elif not any(row.baseline_figure for row in rows) and not any(
        row.judgement.baseline.n for row in rows
    ):
        notes.append("No baseline: no sample lies in the baseline window.")
    missing = MetricSample.objects.filter(release=release, value=None).count()
    if missing:
        notes.append(
            f"{missing:,} sample{'s' if missing != 1 else ''} without a value (NaN, Inf) left out."
        )
    raised = [row for row in rows if row.level != "none"]
    if raised:
        level = max((row.level for row in raised), key=LEVEL_RANK.__getitem__)
        reasons = [reason for row in raised for reason in row.reasons]
        if judge_signal is not None and judge_signal.level != "none":
            reasons.append(judge_signal.detail)
        sentence = f"The metrics raise the release to {level}: " + "; ".join(reasons) + "."
        return MetricsView(level, sentence.replace("..", "."), tuple(notes))
    if judgement is None:
        return MetricsView(
            "none",
            "No series to compare against the baseline (a single scrape, or no samples of the "
            "error rate or p95 in the window); the figures are judged by the policy's limits.",
            tuple(notes),
        )
    level = judge_signal.level if judge_signal is not None else "none"
    return MetricsView(level, judgement.sentence, tuple(notes))
